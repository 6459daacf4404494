#!/usr/bin/env python3
"""Reference fixtures for temper's engine, made by Hugging Face transformers' own Gemma 4 and Gemma 3 classes.

Run in the venv that tools/reference/README.md describes (never by the build or CI):

    python tools/reference/make_fixtures.py OUT_DIR            # writes OUT_DIR/<config>/...
    python tools/reference/make_fixtures.py --compare-shared DIR  # transformers vs DIR/reference.safetensors
    python tools/reference/make_fixtures.py --compare-drafter TARGET_DIR DRAFTER_DIR  # the MTP assistant

For each config below it builds Gemma4ForCausalLM from a Gemma4TextConfig (Gemma3ForCausalLM from a
Gemma3TextConfig for GEMMA3_CONFIGS), fills it with seeded random
weights, rounds them to bf16, saves the model with save_pretrained (config.json + model.safetensors,
bf16), reloads that checkpoint in fp32 and writes reference.safetensors from transformers' fp32 forward.
"""

import argparse
import json
import math
import os
import sys

import numpy as np
import torch
import transformers
from safetensors.numpy import load_file, save_file
from transformers import Gemma3ForCausalLM, Gemma3TextConfig, Gemma4ForCausalLM, Gemma4TextConfig

# Head dims are 32 and 64: the CUDA attention kernels take 32, 64, 128, 256 and 512, and the same
# fixtures run through them (in the SIMT emulator, or on a GPU).
# Every config keeps sqrt(hidden_size) exact in bf16 (64 -> 8, 144 -> 12, 4 -> 2): Gemma's embedding
# scale is sqrt(hidden) cast to the weights' dtype, so an fp32 run of a bf16 checkpoint would
# otherwise scale by a different number than the bf16 model (the 0.0043 difference found on
# ../shared/fixtures/gemma4-tiny, see README.md).
CONFIGS = {
    # The 31B's ratios at tiny widths: sliding GQA 2:1 at head_dim d, full layers with K = V, one KV
    # head for 8 query heads (8:1) at head_dim 2d (the 31B: 256 and 512), proportional RoPE 0.25 on
    # the full layers, softcap 30, tied embeddings, window 8 with prompts past 2x the window.
    "gemma4-31b-ratios": dict(
        vocab_size=512,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=7,  # layer 5 full by the 5:1 pattern, layer 6 forced full as the last
        num_attention_heads=8,
        num_key_value_heads=4,
        head_dim=32,
        global_head_dim=64,
        num_global_key_value_heads=1,
        attention_k_eq_v=True,
        sliding_window=8,
        final_logit_softcapping=30.0,
        prompts=[40, 13, 3],
        greedy=24,
    ),
    # The other branch of each switch: separate V on full layers (so num_key_value_heads applies
    # there too), no final softcap, partial rotary 0.5, an odd window, a different full-layer pattern.
    "gemma4-kv-separate": dict(
        vocab_size=384,
        hidden_size=144,
        intermediate_size=96,
        num_hidden_layers=5,
        layer_types=["sliding_attention", "full_attention", "sliding_attention", "sliding_attention", "full_attention"],
        num_attention_heads=4,
        num_key_value_heads=1,
        head_dim=32,
        global_head_dim=64,
        attention_k_eq_v=False,
        sliding_window=5,
        final_logit_softcapping=None,
        rope_parameters={
            "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
            "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.5, "rope_theta": 1000000.0},
        },
        prompts=[30, 7],
        greedy=20,
    ),
    # The real 262,144-entry vocabulary at hidden size 4 (a 2 MB embedding). Logits are stored for a
    # fixed set of columns only (logit_ids): full rows would be 1 MB each.
    "gemma4-real-vocab": dict(
        vocab_size=262144,
        hidden_size=4,
        intermediate_size=16,
        num_hidden_layers=6,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=32,
        global_head_dim=64,
        num_global_key_value_heads=1,
        attention_k_eq_v=True,
        sliding_window=4,
        final_logit_softcapping=30.0,
        prompts=[20, 9],
        greedy=16,
        logit_columns=512,
    ),
}

# Gemma 3 (Gemma3ForCausalLM from a Gemma3TextConfig), seeded apart from the Gemma 4 configs so that
# adding these leaves every Gemma 4 fixture's bytes as they were. What differs from Gemma 4: norms by
# 1 + w, scores scaled by query_pre_attn_scalar^-0.5, no v_norm, no layer scalar, RoPE bases per
# layer kind (local 1e4, global 1e6) with linear scaling on the full layers of the 4B and larger.
GEMMA3_SEED_BASE = 100
GEMMA3_CONFIGS = {
    # Sliding and full layers by layer_types, GQA 2:1, query_pre_attn_scalar 48 at head_dim 32 (an
    # inexact scale), linear RoPE scaling 8 on the full layers, window 8 with prompts past 2x it.
    "gemma3-scaled-rope": dict(
        vocab_size=512,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=5,
        layer_types=["sliding_attention", "full_attention", "sliding_attention", "sliding_attention", "full_attention"],
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=32,
        query_pre_attn_scalar=48,
        sliding_window=8,
        rope_parameters={
            "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
            "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1000000.0},
        },
        prompts=[40, 13],
        greedy=24,
    ),
    # The 270M's shape at tiny width: one KV head for 4 query heads at head_dim 256, scale 1/16
    # (query_pre_attn_scalar 256), layer kinds from the default pattern (layer 5 of 6 full), no RoPE
    # scaling, window 6.
    "gemma3-270m-shape": dict(
        vocab_size=384,
        hidden_size=16,
        intermediate_size=64,
        num_hidden_layers=6,
        num_attention_heads=4,
        num_key_value_heads=1,
        head_dim=256,
        query_pre_attn_scalar=256,
        sliding_window=6,
        rope_parameters={
            "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
            "full_attention": {"rope_type": "default", "rope_theta": 1000000.0},
        },
        prompts=[30, 5],
        greedy=20,
    ),
}

GEMMA3_COMMON = dict(
    hidden_activation="gelu_pytorch_tanh",
    rms_norm_eps=1e-6,
    max_position_embeddings=4096,
    tie_word_embeddings=True,
    final_logit_softcapping=None,
    attn_logit_softcapping=None,
    bos_token_id=2,
    eos_token_id=1,
    pad_token_id=0,
)

MIN_MARGIN = 0.02

COMMON = dict(
    hidden_size_per_layer_input=0,
    vocab_size_per_layer_input=262144,
    enable_moe_block=False,
    num_kv_shared_layers=0,
    use_double_wide_mlp=False,
    hidden_activation="gelu_pytorch_tanh",
    rms_norm_eps=1e-6,
    max_position_embeddings=4096,
    tie_word_embeddings=True,
    bos_token_id=2,
    eos_token_id=1,
    pad_token_id=0,
)


def make_config(spec, family="gemma4"):
    kwargs = dict(COMMON if family == "gemma4" else GEMMA3_COMMON)
    kwargs.update({k: v for k, v in spec.items() if k not in ("prompts", "greedy", "logit_columns")})
    if family == "gemma4":
        config = Gemma4TextConfig(**kwargs)
        config.architectures = ["Gemma4ForCausalLM"]
    else:
        config = Gemma3TextConfig(**kwargs)
        config.architectures = ["Gemma3ForCausalLM"]
    return config


def fill_weights(model, config, seed, norm_offset=0.0):
    """Seeded random weights, scaled as ../shared/fixtures/README.md explains: HF's own init (N(0, 0.02),
    unit norms and layer scalars) makes every token predict itself and tests nothing. norm_offset is
    what the model's RMSNorm adds to its weight (Gemma 3: 1): the stored weight is the multiplier
    less it. Gemma 3's q/k norms multiply by about 1: its score scale stands where Gemma 4's
    head_dim^-0.25 norms do."""
    g = torch.Generator().manual_seed(seed)
    hidden = config.hidden_size
    for name, p in model.named_parameters():
        with torch.no_grad():
            normal = torch.randn(p.shape, generator=g)
            if name.endswith("embed_tokens.weight"):
                p.copy_(normal)
            elif name.endswith(("q_norm.weight", "k_norm.weight")):
                scale = 1.0 if norm_offset else p.shape[0] ** -0.25
                p.copy_(scale * (1 + 0.25 * normal) - norm_offset)
            elif name.endswith(("post_attention_layernorm.weight", "post_feedforward_layernorm.weight")):
                p.copy_(2 * math.sqrt(hidden) * (1 + 0.25 * normal) - norm_offset)
            elif name.endswith("norm.weight"):  # input/pre-feedforward layernorms and the final norm
                p.copy_(1 + 0.25 * normal - norm_offset)
            elif p.dim() == 2:  # linears, [out, in]
                p.copy_(normal / math.sqrt(p.shape[1]))
            else:
                raise SystemExit(f"no init rule for parameter {name} {tuple(p.shape)}")
    for name, b in model.named_buffers():
        if name.endswith("layer_scalar"):
            with torch.no_grad():
                b.copy_(0.5 + torch.rand(b.shape, generator=g))


def forward(model, ids):
    with torch.no_grad():
        return model(torch.tensor(ids, dtype=torch.long)[None], output_hidden_states=True)


def greedy_generate(model, prompt, steps):
    """transformers' own incremental decode (its KV cache, sliding-window cache included)."""
    with torch.no_grad():
        out = model.generate(
            torch.tensor(prompt, dtype=torch.long)[None],
            max_new_tokens=steps,
            min_new_tokens=steps,
            do_sample=False,
            pad_token_id=0,
        )
    return out[0, len(prompt) :].tolist()


def write_fixture(name, spec, out_dir, seed, family="gemma4"):
    config = make_config(spec, family)
    model_class = Gemma4ForCausalLM if family == "gemma4" else Gemma3ForCausalLM
    torch.manual_seed(seed)
    model = model_class(config).eval()
    fill_weights(model, config, seed, norm_offset=0.0 if family == "gemma4" else 1.0)
    model = model.to(torch.bfloat16)
    target = os.path.join(out_dir, name)
    model.save_pretrained(target)
    if family == "gemma4":
        check_config_as_released(target)

    # The reference: the saved bf16 checkpoint, widened to fp32, run by transformers in fp32 (eager attention).
    model = model_class.from_pretrained(target, dtype=torch.float32, attn_implementation="eager").eval()
    assert float(model.model.embed_tokens.embed_scale) == math.sqrt(config.hidden_size)
    rng = np.random.default_rng(seed + 1000)
    V, steps = config.vocab_size, spec["greedy"]
    tensors = {}
    columns = None
    if "logit_columns" in spec:
        columns = np.sort(rng.choice(V, spec["logit_columns"], replace=False)).astype(np.int64)
    summary = []
    chosen_columns = set()
    prompts = []
    for j, length in enumerate(spec["prompts"]):
        # Random ids, no <pad>/<eos>/<bos>, fed as they are at positions 0..T-1. A prompt whose greedy
        # run passes a near-tie (top-1 minus top-2 below MIN_MARGIN) is drawn again: the fp32 engine
        # is held to the same tokens, and an fp32 summation order moves logits by ~1e-4.
        while True:
            prompt = rng.integers(3, V, size=length).tolist()
            greedy = greedy_generate(model, prompt, steps)
            logits = forward(model, prompt + greedy[:-1]).logits[0, length - 1 :].numpy()
            top2 = np.sort(logits, axis=1)[:, -2:]
            if (top2[:, 1] - top2[:, 0]).min() >= MIN_MARGIN:
                break
        prompts.append((prompt, greedy))
        chosen_columns.update(greedy)
    if columns is not None:
        # The greedy tokens' own columns are always stored, so each step's winner is compared.
        columns = np.array(sorted(set(columns.tolist()) | chosen_columns), dtype=np.int64)
        tensors["logit_ids"] = columns.astype(np.int32)
    for j, (prompt, greedy) in enumerate(prompts):
        T = len(prompt)
        out = forward(model, prompt + greedy[:-1])
        logits = out.logits[0].float().numpy()
        top2 = np.sort(logits[T - 1 :], axis=1)[:, -2:]
        argmax = logits[T - 1 :].argmax(axis=1)
        if argmax.tolist() != greedy:
            raise SystemExit(f"{name} prompt {j}: generate() and the teacher-forced argmax disagree")
        hidden = np.stack([h[0, :T].float().numpy() for h in out.hidden_states])
        rows = logits if columns is None else logits[:, columns]
        tensors[f"input_ids_{j}"] = np.array(prompt, dtype=np.int32)
        tensors[f"logits_{j}"] = np.ascontiguousarray(rows[:T])
        tensors[f"greedy_logits_{j}"] = np.ascontiguousarray(rows[T - 1 :])
        tensors[f"greedy_{j}"] = np.array(greedy, dtype=np.int32)
        tensors[f"greedy_margin_{j}"] = (top2[:, 1] - top2[:, 0]).astype(np.float32)
        tensors[f"hidden_{j}"] = np.ascontiguousarray(hidden)
        summary.append(
            f"  prompt {j}: T={T}, last position {T + steps - 2}, greedy {greedy}, "
            f"smallest margin {tensors[f'greedy_margin_{j}'].min():.3f}, |logit| <= {np.abs(logits).max():.2f}"
        )
    save_file(
        tensors,
        os.path.join(target, "reference.safetensors"),
        # One key: safetensors writes a map's keys in no fixed order, and reruns should give the same bytes.
        metadata={"made_by": f"transformers {transformers.__version__}, torch {torch.__version__}, seed {seed}"},
    )
    print(name)
    print("\n".join(summary))


def check_config_as_released(target, nested=None):
    """transformers 5.23's save_pretrained writes the full layers' geometry as `per_layer_config`; the
    released Gemma 4 checkpoints (written by 5.5.0.dev0) carry `global_head_dim` and
    `num_global_key_value_heads` instead, and temper reads those. The config keeps what 5.23 wrote and
    gains the two released keys, read back from per_layer_config; reloading must give the same config."""
    path = os.path.join(target, "config.json")
    with open(path) as f:
        top = json.load(f)
    saved = top[nested] if nested else top
    per_layer = saved.get("per_layer_config") or {}
    full = [int(i) for i, t in enumerate(saved["layer_types"]) if t == "full_attention"]
    geometry = {json.dumps(per_layer[str(i)], sort_keys=True) for i in full}
    if len(geometry) != 1:
        raise SystemExit(f"{path}: full layers differ in per_layer_config: {geometry}")
    full_geometry = per_layer[str(full[0])]
    saved["global_head_dim"] = full_geometry["head_dim"]
    if "num_key_value_heads" in full_geometry:
        saved["num_global_key_value_heads"] = full_geometry["num_key_value_heads"]
    with open(path, "w") as f:
        json.dump(top, f, indent=2, sort_keys=True)
        f.write("\n")
    if nested is None:
        reread = Gemma4TextConfig.from_pretrained(target)
        for i in full:
            layer = reread.per_layer_config[i]
            assert layer.head_dim == full_geometry["head_dim"], (path, i)


def compare_shared(directory):
    """transformers on ../shared/fixtures/gemma4-tiny's weights vs its numpy reference."""
    ref = load_file(os.path.join(directory, "reference.safetensors"))
    for scale in ("fp32 sqrt(hidden)", "bf16-rounded sqrt(hidden)"):
        model = Gemma4ForCausalLM.from_pretrained(directory, dtype=torch.float32, attn_implementation="eager").eval()
        if scale.startswith("bf16"):
            embed = model.model.embed_tokens
            embed.embed_scale.copy_(embed.embed_scale.to(torch.bfloat16).float())
        print(f"embedding scale {float(model.model.embed_tokens.embed_scale):.7f} ({scale})")
        j = 0
        while f"input_ids_{j}" in ref:
            prompt = ref[f"input_ids_{j}"].tolist()
            greedy = ref[f"greedy_{j}"].tolist()
            T = len(prompt)
            out = forward(model, prompt + greedy[:-1])
            logits = out.logits[0].numpy()
            d_prompt = np.abs(logits[:T] - ref[f"logits_{j}"]).max()
            d_greedy = np.abs(logits[T - 1 :] - ref[f"greedy_logits_{j}"]).max()
            hidden = ref[f"hidden_{j}"]
            rel = [
                np.abs(h[0, :T].numpy() - hidden[i]).max() / np.abs(hidden[i]).max()
                for i, h in enumerate(out.hidden_states)
            ]
            tokens = greedy_generate(model, prompt, len(greedy))
            print(
                f"  prompt {j}: max |dlogit| {d_prompt:.3g} (prompt rows), {d_greedy:.3g} (greedy rows); "
                f"hidden max |d|/max|ref| per entry [0..{len(rel) - 1}]: {' '.join(f'{r:.2g}' for r in rel)}; "
                f"greedy tokens {'equal' if tokens == greedy else f'DIFFER: {tokens} vs {greedy}'}"
            )
            j += 1


def patch_assistant_support():
    """Two changes transformers 5.23.0 needs before its Gemma 4 assistant runs at all (found here):
    1. Gemma4AssistantConfig forces num_kv_shared_layers = num_hidden_layers (every layer reads the
       target's KV), and Gemma4TextConfig.kv_sharing_modes then raises "The set of layer types
       producing a cache is different than the set of layer types using them", so
       Gemma4AssistantForCausalLM cannot even be built. Every layer is "reuse" instead.
    2. A target without KV-shared layers (num_kv_shared_layers = 0, as the 31B and the fixtures
       here) marks no layer "store", so its forward returns an empty shared_kv_states. The caller
       marks the last layer of each kind, the layer the assistant is documented to read."""
    original = Gemma4TextConfig.kv_sharing_modes.fget

    def kv_sharing_modes(config):
        if config.num_kv_shared_layers == config.num_hidden_layers:
            return ["reuse"] * config.num_hidden_layers
        return original(config)

    Gemma4TextConfig.kv_sharing_modes = property(kv_sharing_modes)


# The MTP assistant for gemma4-31b-ratios: 4 layers reading the target's last sliding and last full
# layer (their KV geometry, so the same head dims and KV heads), tied head, no softcap.
ASSISTANT = dict(
    target="gemma4-31b-ratios",
    text=dict(
        vocab_size=512,
        hidden_size=32,
        intermediate_size=96,
        num_hidden_layers=4,
        layer_types=["sliding_attention", "sliding_attention", "sliding_attention", "full_attention"],
        num_attention_heads=8,
        num_key_value_heads=4,
        head_dim=32,
        global_head_dim=64,
        num_global_key_value_heads=1,
        attention_k_eq_v=True,
        sliding_window=8,
        final_logit_softcapping=None,
        vocab_size_per_layer_input=0,
    ),
    steps=4,
    # (prompt, target cache length L). The drafter's sliding layers see the last window + 1 target
    # positions (see README.md): six caches shorter than the window, four past it.
    cases=[(0, 2), (0, 5), (0, 7), (1, 3), (1, 6), (2, 4), (0, 12), (0, 40), (1, 20), (2, 15)],
)


def write_assistant_fixture(out_dir, seed):
    """An MTP assistant on a target fixture, and drafts by transformers' own candidate generator, in
    tests/data/gemma4-tiny-assistant's reference format."""
    from transformers import Gemma4AssistantConfig, GenerationConfig
    from transformers.generation.candidate_generator import SinglePositionMultiTokenCandidateGenerator

    patch_assistant_support()
    from transformers import Gemma4AssistantForCausalLM

    target_dir = os.path.join(out_dir, ASSISTANT["target"])
    target_ref = load_file(os.path.join(target_dir, "reference.safetensors"))
    target = Gemma4ForCausalLM.from_pretrained(target_dir, dtype=torch.float32, attn_implementation="eager").eval()
    kinds = target.config.layer_types
    for kind in set(kinds):
        last = max(i for i, t in enumerate(kinds) if t == kind)
        target.model.layers[last].self_attn.store_full_length_kv = True

    text = dict(COMMON)
    text.update(ASSISTANT["text"])
    config = Gemma4AssistantConfig(
        text_config=Gemma4TextConfig(**text), backbone_hidden_size=target.config.hidden_size
    )
    config.architectures = ["Gemma4AssistantForCausalLM"]
    torch.manual_seed(seed)
    assistant = Gemma4AssistantForCausalLM(config).eval()
    fill_weights(assistant, config.text_config, seed)
    assistant = assistant.to(torch.bfloat16)
    directory = os.path.join(out_dir, ASSISTANT["target"] + "-assistant")
    assistant.save_pretrained(directory)
    check_config_as_released(directory, nested="text_config")

    assistant = Gemma4AssistantForCausalLM.from_pretrained(
        directory, dtype=torch.float32, attn_implementation="eager"
    ).eval()
    steps = ASSISTANT["steps"]
    assistant.generation_config.num_assistant_tokens = steps
    tensors = {}
    prompts = sorted({p for p, _ in ASSISTANT["cases"]})
    for j in prompts:
        sequence = target_ref[f"input_ids_{j}"].tolist() + target_ref[f"greedy_{j}"].tolist()
        tensors[f"sequence_{j}"] = np.array(sequence, dtype=np.int32)
    case_tokens, case_logits = [], []
    for j, length in ASSISTANT["cases"]:
        sequence = torch.tensor(tensors[f"sequence_{j}"].astype(np.int64))[None]
        assert 0 < length < sequence.shape[1]
        with torch.no_grad():
            out = target(sequence[:, :length], output_hidden_states=True, return_shared_kv_states=True)
        generator = SinglePositionMultiTokenCandidateGenerator(
            assistant, target.get_input_embeddings(), GenerationConfig(max_length=4096)
        )
        candidates, logits = generator.get_candidates(sequence[:, : length + 1], {"attention_mask": None}, out, False, 0)
        case_tokens.append(candidates[0, length + 1 :].tolist())
        case_logits.append(logits[0].numpy())
    logits = np.stack(case_logits).astype(np.float32)
    top2 = np.sort(logits, axis=-1)[..., -2:]
    tensors["case_prompt"] = np.array([p for p, _ in ASSISTANT["cases"]], dtype=np.int32)
    tensors["case_length"] = np.array([n for _, n in ASSISTANT["cases"]], dtype=np.int32)
    tensors["draft_tokens"] = np.array(case_tokens, dtype=np.int32)
    tensors["draft_logits"] = logits
    tensors["draft_margin"] = (top2[..., 1] - top2[..., 0]).astype(np.float32)
    save_file(
        tensors,
        os.path.join(directory, "reference.safetensors"),
        metadata={"made_by": f"transformers {transformers.__version__}, torch {torch.__version__}, seed {seed}"},
    )
    print(os.path.basename(directory))
    for (j, length), tokens, margin in zip(ASSISTANT["cases"], case_tokens, tensors["draft_margin"]):
        print(f"  prompt {j}, cache length {length}: drafts {tokens}, smallest margin {margin.min():.3f}")


def compare_drafter(target_dir, drafter_dir, window):
    """transformers' Gemma4AssistantForCausalLM, driven by its own candidate generator, on the
    draft cases of DRAFTER_DIR/reference.safetensors (tests/data/gemma4-tiny-assistant's format)."""
    from transformers import GenerationConfig
    from transformers.generation.candidate_generator import SinglePositionMultiTokenCandidateGenerator

    patch_assistant_support()
    from transformers import Gemma4AssistantForCausalLM

    ref = load_file(os.path.join(drafter_dir, "reference.safetensors"))
    target = Gemma4ForCausalLM.from_pretrained(target_dir, dtype=torch.float32, attn_implementation="eager").eval()
    embed = target.model.embed_tokens
    embed.embed_scale.copy_(embed.embed_scale.to(torch.bfloat16).float())  # the bf16 model's scale, as the reference
    kinds = target.config.layer_types
    for kind in set(kinds):
        last = max(i for i, t in enumerate(kinds) if t == kind)
        target.model.layers[last].self_attn.store_full_length_kv = True
    assistant = Gemma4AssistantForCausalLM.from_pretrained(
        drafter_dir, dtype=torch.float32, attn_implementation="eager"
    ).eval()
    if window is not None:
        assistant.config.text_config.sliding_window = window
    print(f"assistant sliding-window mask: distance <= {assistant.config.text_config.sliding_window}")
    assistant.generation_config.num_assistant_tokens = ref["draft_tokens"].shape[1]
    for case in range(len(ref["case_prompt"])):
        prompt, length = int(ref["case_prompt"][case]), int(ref["case_length"][case])
        sequence = torch.tensor(ref[f"sequence_{prompt}"].astype(np.int64))[None]
        with torch.no_grad():
            out = target(sequence[:, :length], output_hidden_states=True, return_shared_kv_states=True)
        generator = SinglePositionMultiTokenCandidateGenerator(
            assistant, target.get_input_embeddings(), GenerationConfig(max_length=4096)
        )
        # The target's cache holds positions 0..L-1 and its next token (position L) is sequence[L].
        candidates, logits = generator.get_candidates(sequence[:, : length + 1], {"attention_mask": None}, out, False, 0)
        tokens = candidates[0, length + 1 :].tolist()
        per_step = np.abs(logits[0].numpy() - ref["draft_logits"][case]).max(axis=1)
        want = ref["draft_tokens"][case].tolist()
        print(
            f"  case {case} (prompt {prompt}, cache length {length}): max |dlogit| per draft step "
            f"{' '.join(f'{d:.2g}' for d in per_step)}; tokens {'equal' if tokens == want else f'DIFFER: {tokens} vs {want}'}"
        )


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out_dir", nargs="?", help="where to write one directory per config")
    parser.add_argument("--compare-shared", metavar="DIR", help="compare DIR/reference.safetensors with transformers")
    parser.add_argument("--only", action="append", help="write only this config (repeatable)")
    parser.add_argument(
        "--compare-drafter",
        nargs=2,
        metavar=("TARGET_DIR", "DRAFTER_DIR"),
        help="run transformers' Gemma 4 assistant on DRAFTER_DIR/reference.safetensors' draft cases",
    )
    parser.add_argument("--drafter-window", type=int, help="with --compare-drafter: the assistant's mask window")
    args = parser.parse_args()
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)  # one summation order, so reruns write the same bytes
    print(f"transformers {transformers.__version__}, torch {torch.__version__}")
    if args.compare_shared:
        compare_shared(args.compare_shared)
        return
    if args.compare_drafter:
        compare_drafter(*args.compare_drafter, args.drafter_window)
        return
    if not args.out_dir:
        parser.error("give OUT_DIR or --compare-shared DIR")
    for seed, (name, spec) in enumerate(CONFIGS.items()):
        if args.only and name not in args.only:
            continue
        write_fixture(name, spec, args.out_dir, seed)
    if not args.only or ASSISTANT["target"] + "-assistant" in args.only:
        write_assistant_fixture(args.out_dir, len(CONFIGS))
    for index, (name, spec) in enumerate(GEMMA3_CONFIGS.items()):
        if args.only and name not in args.only:
            continue
        write_fixture(name, spec, args.out_dir, GEMMA3_SEED_BASE + index, family="gemma3")


if __name__ == "__main__":
    sys.exit(main())
