#!/usr/bin/python3
"""Writes a tiny Gemma 4 MTP drafter ("assistant") for tests/data/gemma4-tiny and its reference drafts.

Independent of the engine: numpy only, written from Hugging Face's gemma4_assistant code and the
notes in shared/notes/mtp.md, sharing no code with the C++ engine. Run from this directory with
Debian's python3-numpy:

    /usr/bin/python3 make_reference.py

It first recomputes the target model (../gemma4-tiny) and checks itself against the golden fixture's
logits and final hidden states, so the target KV and hidden states it hands the drafter are
anchored to an implementation outside this repository. Outputs (byte-for-byte reproducible):

  config.json             Gemma4AssistantConfig.to_dict()-style keys, text_config included
  model.safetensors       the drafter's bf16 weights, named as save_pretrained names them
  reference.safetensors   draft cases (below)

One draft step, for a target whose cache holds positions 0..L-1, whose final-norm hidden state at
position L-1 is h, and whose next token (at position L, not yet fed) is t:
  x = pre_projection(concat(target_embed[t] * bf16(sqrt(H_target)), h))
  4 decoder layers at position L; layer l of kind k attends, with scaling 1.0, over the target's
  stored K (k-normed, roped) and V (v-normed) of the target's LAST layer of kind k, positions
  0..L-1 (sliding: only the last window + 1 of them, positions >= L - window - 1, as transformers'
  Gemma4AssistantForCausalLM reads the target's full-length states: a bidirectional window,
  distance <= window, flipped to face the past);
  n = final norm; logits = drafter_embed . n (tied, no softcap); draft = argmax;
  h_next = post_projection(n).
Later steps feed the draft and h_next at the SAME position L over the same keys.
"""
import json
import struct

import numpy as np

TARGET_DIR = "../gemma4-tiny"
STEPS = 4  # draft tokens per case
CASES = [(0, 5), (0, 12), (0, 23), (0, 30), (1, 3), (1, 12), (1, 20)]  # (prompt, cache length L)


# ---- safetensors ----
def read_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8 : 8 + n])
    base = 8 + n
    out = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        b, e = meta["data_offsets"]
        buf = raw[base + b : base + e]
        if meta["dtype"] == "BF16":
            arr = (np.frombuffer(buf, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
        elif meta["dtype"] == "F32":
            arr = np.frombuffer(buf, dtype="<f4")
        elif meta["dtype"] == "I32":
            arr = np.frombuffer(buf, dtype="<i4")
        else:
            raise ValueError(f"{path}: {name} has dtype {meta['dtype']}")
        out[name] = arr.reshape(meta["shape"]).copy()
    return out


def write_safetensors(path, tensors, metadata):
    header, blobs, offset = {"__metadata__": metadata}, [], 0
    for name, (dtype, arr) in tensors.items():
        data = arr.tobytes()
        header[name] = {"dtype": dtype, "shape": list(arr.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


def to_bf16_bits(x):
    """Round-to-nearest-even fp32 -> bf16 bits."""
    u = np.atleast_1d(np.asarray(x, dtype=np.float32)).view(np.uint32).astype(np.uint64)
    u = (u + np.uint64(0x7FFF) + ((u >> np.uint64(16)) & np.uint64(1))) >> np.uint64(16)
    return u.astype("<u2").reshape(np.shape(x))


def from_bf16_bits(b):
    return (np.atleast_1d(b).astype(np.uint32) << np.uint32(16)).view(np.float32).reshape(np.shape(b))


# ---- shared pieces of the Gemma 4 decoder ----
def rms(x, w=None, eps=1e-6):
    y = x / np.sqrt(np.mean(x.astype(np.float64) ** 2, axis=-1, keepdims=True) + eps).astype(np.float32)
    return y if w is None else y * w


def gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(np.float32(0.7978845608028654) * (x + np.float32(0.044715) * x ** 3)))


def rope_tables(rope, head_dim, positions):
    """cos/sin [len(positions), head_dim/2]; frequencies past the rotated ones are 0 (no rotation)."""
    theta = rope["rope_theta"]
    if rope.get("rope_type", "default") == "proportional":
        angles = int(rope["partial_rotary_factor"] * head_dim // 2)
    else:
        angles = head_dim // 2
    inv = np.zeros(head_dim // 2, dtype=np.float32)
    j = np.arange(angles, dtype=np.float32)
    inv[:angles] = 1.0 / np.power(np.float32(theta), 2.0 * j / np.float32(head_dim)).astype(np.float32)
    ang = np.asarray(positions, dtype=np.float32)[:, None] * inv[None, :]
    return np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)


def apply_rope(x, cos, sin):
    """x [..., T, heads, hd]; rotate_half pairs dim j with j + hd/2."""
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    c, s = cos[:, None, :], sin[:, None, :]
    return np.concatenate([x1 * c - x2 * s, x2 * c + x1 * s], axis=-1)


def attend(q, k, v):
    """One query's heads q [nq, hd] over keys k and values v [n, nkv, hd]; scaling 1.0, GQA."""
    group = q.shape[0] // k.shape[1]
    out = np.zeros_like(q)
    for h in range(q.shape[0]):
        s = k[:, h // group] @ q[h]
        e = np.exp(s - s.max())
        out[h] = (e / e.sum()) @ v[:, h // group]
    return out


def finish_layer(x, att, w, p, eps):
    """The rest of a decoder layer after attention: o_proj, sandwich norms, MLP, layer_scalar."""
    o = att.reshape(att.shape[0], -1) @ w[p + "self_attn.o_proj.weight"].T
    x = x + rms(o, w[p + "post_attention_layernorm.weight"], eps)
    m = rms(x, w[p + "pre_feedforward_layernorm.weight"], eps)
    m = (gelu_tanh(m @ w[p + "mlp.gate_proj.weight"].T) * (m @ w[p + "mlp.up_proj.weight"].T)) @ w[
        p + "mlp.down_proj.weight"
    ].T
    return (x + rms(m, w[p + "post_feedforward_layernorm.weight"], eps)) * w[p + "layer_scalar"][0]


def kinds(config):
    return ["full" if t == "full_attention" else "sliding" for t in config["layer_types"]]


# ---- the target: full recompute over one token sequence ----
def target_forward(cfg, w, ids):
    T, H = len(ids), cfg["hidden_size"]
    eps = cfg["rms_norm_eps"]
    scale = from_bf16_bits(to_bf16_bits(np.float32(np.sqrt(H)))).item()
    x = w["model.embed_tokens.weight"][ids] * scale
    pos = np.arange(T)
    kv = {}
    for l, kind in enumerate(kinds(cfg)):
        p = f"model.layers.{l}."
        full = kind == "full"
        hd = cfg["global_head_dim"] if full else cfg["head_dim"]
        nkv = cfg["num_global_key_value_heads"] if full and cfg["attention_k_eq_v"] else cfg["num_key_value_heads"]
        nq = cfg["num_attention_heads"]
        rope = cfg["rope_parameters"]["full_attention" if full else "sliding_attention"]
        cos, sin = rope_tables(rope, hd, pos)
        a = rms(x, w[p + "input_layernorm.weight"], eps)
        q = (a @ w[p + "self_attn.q_proj.weight"].T).reshape(T, nq, hd)
        k_raw = (a @ w[p + "self_attn.k_proj.weight"].T).reshape(T, nkv, hd)
        if full and cfg["attention_k_eq_v"]:
            v_raw = k_raw
        else:
            v_raw = (a @ w[p + "self_attn.v_proj.weight"].T).reshape(T, nkv, hd)
        q = apply_rope(rms(q, w[p + "self_attn.q_norm.weight"], eps), cos, sin)
        k = apply_rope(rms(k_raw, w[p + "self_attn.k_norm.weight"], eps), cos, sin)
        v = rms(v_raw, None, eps)
        kv[l] = (k, v)
        att = np.zeros((T, nq, hd), dtype=np.float32)
        for t in range(T):
            lo = max(0, t - cfg["sliding_window"] + 1) if not full else 0
            att[t] = attend(q[t], k[lo : t + 1], v[lo : t + 1])
        x = finish_layer(x, att, w, p, eps)
    final = rms(x, w["model.norm.weight"], eps)
    logits = final @ w["model.embed_tokens.weight"].T
    cap = cfg["final_logit_softcapping"]
    return cap * np.tanh(logits / cap), final, kv


# ---- the drafter ----
def draft(dcfg, dw, tcfg, tw, kv, L, h, token, steps):
    """Greedy drafts at position L over the target cache kv (positions 0..L-1)."""
    text = dcfg["text_config"]
    eps = text["rms_norm_eps"]
    target_kinds = kinds(tcfg)
    last_of = {k: max(i for i, kk in enumerate(target_kinds) if kk == k) for k in ("sliding", "full")}
    escale = from_bf16_bits(to_bf16_bits(np.float32(np.sqrt(tcfg["hidden_size"])))).item()
    tokens, rows = [], []
    for _ in range(steps):
        e = tw["model.embed_tokens.weight"][token] * escale
        x = np.concatenate([e, h]) @ dw["pre_projection.weight"].T
        for l, kind in enumerate(kinds(text)):
            p = f"model.layers.{l}."
            full = kind == "full"
            hd = text["global_head_dim"] if full else text["head_dim"]
            nq = text["num_attention_heads"]
            k, v = kv[last_of[kind]]
            lo = 0 if full else max(0, L - text["sliding_window"] - 1)
            k, v = k[lo:L], v[lo:L]
            rope = text["rope_parameters"]["full_attention" if full else "sliding_attention"]
            cos, sin = rope_tables(rope, hd, [L])
            a = rms(x, dw[p + "input_layernorm.weight"], eps)
            q = (a @ dw[p + "self_attn.q_proj.weight"].T).reshape(1, nq, hd)
            q = apply_rope(rms(q, dw[p + "self_attn.q_norm.weight"], eps), cos, sin)[0]
            x = finish_layer(x[None, :], attend(q, k, v)[None], dw, p, eps)[0]
        n = rms(x, dw["model.norm.weight"], eps)
        logits = n @ dw["model.embed_tokens.weight"].T
        token = int(np.argmax(logits))
        h = n @ dw["post_projection.weight"].T
        tokens.append(token)
        rows.append(logits)
    return tokens, np.stack(rows)


def drafter_config(tcfg):
    text = {
        "model_type": "gemma4_text",
        "architectures": None,
        "vocab_size": tcfg["vocab_size"],
        "hidden_size": 64,
        "intermediate_size": 160,
        "num_hidden_layers": 4,
        "layer_types": ["sliding_attention"] * 3 + ["full_attention"],
        "num_attention_heads": 4,
        "num_key_value_heads": tcfg["num_key_value_heads"],
        "num_global_key_value_heads": tcfg["num_global_key_value_heads"],
        "head_dim": tcfg["head_dim"],
        "global_head_dim": tcfg["global_head_dim"],
        "attention_k_eq_v": True,
        "num_kv_shared_layers": 4,
        "sliding_window": tcfg["sliding_window"],
        "rope_parameters": tcfg["rope_parameters"],
        "rms_norm_eps": 1e-06,
        "final_logit_softcapping": None,
        "hidden_activation": "gelu_pytorch_tanh",
        "hidden_size_per_layer_input": 0,
        "vocab_size_per_layer_input": 0,
        "enable_moe_block": False,
        "use_double_wide_mlp": False,
        "max_position_embeddings": tcfg["max_position_embeddings"],
        "tie_word_embeddings": True,
        "bos_token_id": 2,
        "eos_token_id": 1,
        "pad_token_id": 0,
        "dtype": "bfloat16",
    }
    return {
        "architectures": ["Gemma4AssistantForCausalLM"],
        "model_type": "gemma4_assistant",
        "backbone_hidden_size": tcfg["hidden_size"],
        "use_ordered_embeddings": False,
        "num_centroids": 2048,
        "centroid_intermediate_top_k": 32,
        "tie_word_embeddings": True,
        "dtype": "bfloat16",
        "text_config": text,
        "transformers_version": "5.5.0.dev0",
    }


def drafter_weights(dcfg):
    """Random bf16 weights in checkpoint order, scaled as the golden fixture's (its README)."""
    text = dcfg["text_config"]
    rng = np.random.default_rng(1)
    Hd, Hb, F = text["hidden_size"], dcfg["backbone_hidden_size"], text["intermediate_size"]
    nq = text["num_attention_heads"]
    out = {}

    def add(name, shape, kind):
        if kind == "embed":
            x = rng.standard_normal(shape)
        elif kind == "linear":
            x = rng.standard_normal(shape) / np.sqrt(shape[1])
        elif kind == "norm":
            x = 1 + 0.25 * rng.standard_normal(shape)
        elif kind == "qnorm":
            x = shape[0] ** -0.25 * (1 + 0.25 * rng.standard_normal(shape))
        elif kind == "post":
            x = 2 * np.sqrt(Hd) * (1 + 0.25 * rng.standard_normal(shape))
        else:
            x = rng.uniform(0.5, 1.5, shape)
        out[name] = to_bf16_bits(x.astype(np.float32))

    add("model.embed_tokens.weight", [text["vocab_size"], Hd], "embed")
    for l, kind in enumerate(kinds(text)):
        p = f"model.layers.{l}."
        hd = text["global_head_dim"] if kind == "full" else text["head_dim"]
        add(p + "self_attn.q_proj.weight", [nq * hd, Hd], "linear")
        add(p + "self_attn.o_proj.weight", [Hd, nq * hd], "linear")
        add(p + "self_attn.q_norm.weight", [hd], "qnorm")
        add(p + "mlp.gate_proj.weight", [F, Hd], "linear")
        add(p + "mlp.up_proj.weight", [F, Hd], "linear")
        add(p + "mlp.down_proj.weight", [Hd, F], "linear")
        add(p + "input_layernorm.weight", [Hd], "norm")
        add(p + "post_attention_layernorm.weight", [Hd], "post")
        add(p + "pre_feedforward_layernorm.weight", [Hd], "norm")
        add(p + "post_feedforward_layernorm.weight", [Hd], "post")
        add(p + "layer_scalar", [1], "scalar")
    add("model.norm.weight", [Hd], "norm")
    add("pre_projection.weight", [Hd, 2 * Hb], "linear")
    add("post_projection.weight", [Hb, Hd], "linear")
    return out


def main():
    tcfg = json.load(open(f"{TARGET_DIR}/config.json"))
    tw = read_safetensors(f"{TARGET_DIR}/model.safetensors")
    golden = read_safetensors(f"{TARGET_DIR}/reference.safetensors")

    dcfg = drafter_config(tcfg)
    bits = drafter_weights(dcfg)
    dw = {name: from_bf16_bits(b) for name, b in bits.items()}

    sequences, runs = [], []
    for J in (0, 1):
        ids = np.concatenate([golden[f"input_ids_{J}"], golden[f"greedy_{J}"]]).astype(np.int64)
        logits, final, kv = target_forward(tcfg, tw, ids)
        # Anchor: the prompt's logits and final hidden states, and the greedy rows, as the golden
        # fixture has them (its README's fp32 tolerance).
        T = len(golden[f"input_ids_{J}"])
        assert np.abs(logits[:T] - golden[f"logits_{J}"]).max() < 1e-3
        assert np.abs(logits[T - 1 : T + 15] - golden[f"greedy_logits_{J}"]).max() < 1e-3
        ref_final = golden[f"hidden_{J}"][-1]
        assert np.abs(final[:T] - ref_final).max() / np.abs(ref_final).max() < 1e-4
        sequences.append(ids)
        runs.append((final, kv))

    case_prompt, case_length, case_tokens, case_logits = [], [], [], []
    for J, L in CASES:
        final, kv = runs[J]
        ids = sequences[J]
        assert 0 < L < len(ids)
        tokens, rows = draft(dcfg, dw, tcfg, tw, kv, L, final[L - 1], int(ids[L]), STEPS)
        case_prompt.append(J)
        case_length.append(L)
        case_tokens.append(tokens)
        case_logits.append(rows)
    logits = np.stack(case_logits).astype(np.float32)
    top2 = np.sort(logits, axis=-1)[..., -2:]
    margin = (top2[..., 1] - top2[..., 0]).astype(np.float32)

    with open("config.json", "w") as f:
        json.dump(dcfg, f, indent=2, sort_keys=True)
        f.write("\n")
    write_safetensors("model.safetensors", {n: ("BF16", b) for n, b in bits.items()}, {"format": "pt"})
    write_safetensors(
        "reference.safetensors",
        {
            "sequence_0": ("I32", sequences[0].astype("<i4")),
            "sequence_1": ("I32", sequences[1].astype("<i4")),
            "case_prompt": ("I32", np.array(case_prompt, dtype="<i4")),
            "case_length": ("I32", np.array(case_length, dtype="<i4")),
            "draft_tokens": ("I32", np.array(case_tokens, dtype="<i4")),
            "draft_logits": ("F32", logits.astype("<f4")),
            "draft_margin": ("F32", margin.astype("<f4")),
        },
        {"format": "pt"},
    )
    print("drafts:", case_tokens)
    print("smallest margin: %.4f" % margin.min())


if __name__ == "__main__":
    main()
