#!/usr/bin/env python3
"""What transformers' own Gemma3ForCausalLM says about the real model the engine's tests run.

The model is Gemma 3 270M in Q4_K_M (deploy/fetch_test_models.sh puts it in BUILD/models/). This
script loads that GGUF with transformers' own GGUF support (gguf-py dequantizes, transformers undoes
llama.cpp's 1 + w norm convention), rounds every weight to bf16 as temper's loader does, and writes
what tests/engine/real_model_test.cpp compares the engine with:

    python tools/reference/real_model_reference.py BUILD/models/gemma-3-270m-q4_k_m.gguf \
        tests/data/reference/gemma3-270m-q4km

Run in the venv tools/reference/README.md describes, plus gguf and accelerate (requirements.in).
It computes in fp32 from the bf16 weights with eager attention, one torch thread, so reruns write
the same bytes.
"""

import argparse
import hashlib
import json
import os
import sys

import numpy as np
import torch
from safetensors.numpy import save_file
from transformers import AutoModelForCausalLM, AutoTokenizer

GREEDY_STEPS = 64
SUBSET = 512  # random vocabulary columns kept per logit row, besides the greedy tokens

# Prompts of different kinds. The last is longer than the 512-token sliding window, so the engine's
# window, ring cache and the full layers' long reach are all compared on real weights.
PROMPTS = [
    "The capital of France is",
    "To disable direct root login over SSH, edit /etc/ssh/sshd_config and set",
    "<start_of_turn>user\nWrite one sentence about the sea.<end_of_turn>\n<start_of_turn>model\n",
    "def fibonacci(n):\n",
    None,  # the long prompt, built below
]


def long_prompt():
    # A fixed text of about 600 tokens: a STIG rule's prose, numbered, so it never repeats exactly.
    rule = (
        "Rule {i}: The operating system must be configured so that the SSH daemon does not permit "
        "authentication using an empty password, because configuring this setting for the SSH daemon "
        "provides additional assurance that remote login via SSH will require a password. "
    )
    return "".join(rule.format(i=i) for i in range(1, 13))


def round_weights_to_bf16(model):
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(p.to(torch.bfloat16).to(torch.float32))
    # Gemma scales the embedding by sqrt(hidden) cast to the weights' dtype. temper holds the
    # weights in bf16 and scales by bf16(sqrt(640)) = 25.25, not the fp32 root 25.298.
    embed = model.model.embed_tokens
    embed.embed_scale.copy_(embed.embed_scale.to(torch.bfloat16).to(torch.float32))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("gguf")
    parser.add_argument("out_dir")
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)

    directory, name = os.path.split(os.path.abspath(args.gguf))
    model = AutoModelForCausalLM.from_pretrained(
        directory, gguf_file=name, dtype=torch.float32, attn_implementation="eager"
    )
    model.eval()
    round_weights_to_bf16(model)
    tokenizer = AutoTokenizer.from_pretrained(directory, gguf_file=name)
    config = model.config
    vocab = config.vocab_size

    prompts = [p if p is not None else long_prompt() for p in PROMPTS]
    rng = np.random.default_rng(2026)
    tensors = {}
    greedy_tokens = []
    with torch.no_grad():
        for j, text in enumerate(prompts):
            ids = tokenizer(text).input_ids  # <bos> first
            # Greedy with transformers' own incremental decode and KV cache; no stop at <eos>.
            out = model(input_ids=torch.tensor([ids]), use_cache=True)
            cache = out.past_key_values
            row = out.logits[0, -1]
            greedy = []
            for _ in range(GREEDY_STEPS):
                token = int(torch.argmax(row))
                greedy.append(token)
                out = model(input_ids=torch.tensor([[token]]), past_key_values=cache, use_cache=True)
                cache = out.past_key_values
                row = out.logits[0, -1]
            greedy_tokens.append(greedy)
            # One teacher-forced pass over prompt + greedy[:-1]: every row the tests read.
            full = model(input_ids=torch.tensor([ids + greedy[:-1]]), output_hidden_states=True)
            logits = full.logits[0].double().numpy()
            t = len(ids)
            # Prompt rows: the last 8, and every 64th before them (positions past the window in
            # the long prompt).
            prompt_rows = sorted(set(list(range(0, t, 64)) + list(range(max(0, t - 8), t))))
            greedy_rows = list(range(t - 1, t - 1 + GREEDY_STEPS))
            assert [int(np.argmax(logits[r])) for r in greedy_rows] == greedy, "teacher-forced != incremental"
            top2 = np.sort(logits[greedy_rows], axis=1)[:, -2:]
            tensors[f"input_ids_{j}"] = np.array(ids, dtype=np.int32)
            tensors[f"greedy_{j}"] = np.array(greedy, dtype=np.int32)
            tensors[f"greedy_margin_{j}"] = (top2[:, 1] - top2[:, 0]).astype(np.float32)
            tensors[f"prompt_rows_{j}"] = np.array(prompt_rows, dtype=np.int32)
            for kind, rows in (("prompt", prompt_rows), ("greedy", greedy_rows)):
                lse = np.log(np.exp(logits[rows] - logits[rows].max(axis=1, keepdims=True)).sum(axis=1))
                tensors[f"{kind}_logsumexp_{j}"] = (lse + logits[rows].max(axis=1)).astype(np.float64)
                tensors[f"{kind}_logits_full_{j}"] = logits[rows]  # narrowed to logit_ids below
            hidden = torch.stack([h[0, t - 1] for h in full.hidden_states]).numpy()
            tensors[f"hidden_last_{j}"] = hidden.astype(np.float32)  # [layers + 1, hidden]

    greedy_ids = sorted({tok for g in greedy_tokens for tok in g})
    subset = rng.choice(vocab, size=SUBSET, replace=False)
    logit_ids = np.array(sorted(set(subset.tolist()) | set(greedy_ids)), dtype=np.int32)
    tensors["logit_ids"] = logit_ids
    for key in [k for k in tensors if "_logits_full_" in k]:
        tensors[key.replace("_logits_full_", "_logits_")] = tensors.pop(key)[:, logit_ids].astype(np.float32)

    os.makedirs(args.out_dir, exist_ok=True)
    with open(args.gguf, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    metadata = {
        "model": "gemma-3-270m-q4_k_m.gguf",
        "gguf_sha256": digest,
        "transformers": __import__("transformers").__version__,
        "torch": torch.__version__,
        "prompts": json.dumps(prompts),
    }
    # safetensors' numpy writer copies an array's memory as it lies: a column selection is
    # Fortran-ordered, and would be written transposed in place. Every tensor goes out C-ordered.
    tensors = {k: np.ascontiguousarray(v) for k, v in tensors.items()}
    save_file(tensors, os.path.join(args.out_dir, "reference.safetensors"), metadata=metadata)
    margins = np.concatenate([tensors[f"greedy_margin_{j}"] for j in range(len(prompts))])
    print(f"{args.out_dir}: {len(prompts)} prompts, {len(logit_ids)} logit columns, "
          f"smallest greedy margin {margins.min():.4f}", file=sys.stderr)
    for j in range(len(prompts)):
        print(f"prompt {j} ({len(tensors[f'input_ids_{j}'])} tokens): {tokenizer.decode(greedy_tokens[j])!r}",
              file=sys.stderr)


if __name__ == "__main__":
    main()
