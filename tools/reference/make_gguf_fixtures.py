#!/usr/bin/env python3
"""GGUF fixtures for temper's GGUF reader and dequantizers, made with gguf-py (llama.cpp's own).

    make_gguf_fixtures.py OUT_DIR                    # tests/data/gguf: types.gguf + types-expected.safetensors
    make_gguf_fixtures.py OUT_DIR --real FILE.gguf   # also gemma3-270m-fingerprint.json from the real model

types.gguf holds one tensor per ggml type temper dequantizes (F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1,
Q8_0, Q4_K, Q5_K, Q6_K), each 3 rows of 512 values, and one metadata key of every GGUF value type.
The quantized tensors are random block bytes (numpy, seeded) whose fp16 scale fields are overwritten
with sane values (|d| <= 0.05, some subnormal, some negative); the float tensors hold random values
plus zeros, signed zeros, fp16 subnormals and infinities. types-expected.safetensors holds, under
the same names, gguf-py's `gguf.quants.dequantize` of each tensor in fp32, shaped as Hugging Face
orders dimensions (GGUF's reversed).

The fingerprint of the real model lists, for a few tensors (one per type the file uses), the first
16 dequantized values and fp64 sums of the values and of their absolute values.

Same seed, same bytes: rerunning writes identical files.
"""

import argparse
import json
import pathlib

import numpy as np
from safetensors.numpy import save_file

import gguf
from gguf import GGMLQuantizationType as T
from gguf.quants import dequantize

ROWS, COLS = 3, 512

# Where each block keeps its fp16 scales (ggml-common.h's block_* structs): byte offsets.
SCALE_OFFSETS = {
    T.Q4_0: [0],
    T.Q4_1: [0, 2],
    T.Q5_0: [0],
    T.Q5_1: [0, 2],
    T.Q8_0: [0],
    T.Q4_K: [0, 2],
    T.Q5_K: [0, 2],
    T.Q6_K: [208],
}


def quantized_bytes(rng: np.random.Generator, qtype: T) -> np.ndarray:
    block_elements, block_bytes = gguf.GGML_QUANT_SIZES[qtype]
    blocks = ROWS * COLS // block_elements
    raw = rng.integers(0, 256, size=(blocks, block_bytes), dtype=np.uint8)
    for offset in SCALE_OFFSETS[qtype]:
        scales = rng.uniform(-0.05, 0.05, size=blocks).astype(np.float16)
        scales[0] = np.float16(3e-7)  # an fp16 subnormal
        scales[1] = -scales[1]
        raw[:, offset:offset + 2] = scales.view(np.uint8).reshape(blocks, 2)
    return raw.reshape(ROWS, COLS // block_elements * block_bytes)


def float_values(rng: np.random.Generator) -> np.ndarray:
    values = rng.normal(0, 1, size=(ROWS, COLS)).astype(np.float32)
    values[0, :8] = [0.0, -0.0, 6e-8, -6e-8, 65504.0, np.inf, -np.inf, 1e-5]
    return values


def write_types(out: pathlib.Path) -> None:
    rng = np.random.default_rng(47)
    writer = gguf.GGUFWriter(str(out / "types.gguf"), arch="temper-fixture")
    # One key of every value type, read back by gguf_file_test.cpp.
    writer.add_uint8("fixture.u8", 200)
    writer.add_int8("fixture.i8", -100)
    writer.add_uint16("fixture.u16", 60000)
    writer.add_int16("fixture.i16", -30000)
    writer.add_uint32("fixture.u32", 4000000000)
    writer.add_int32("fixture.i32", -2000000000)
    writer.add_float32("fixture.f32", 0.15625)
    writer.add_bool("fixture.bool", True)
    writer.add_string("fixture.string", "héllo ▁ world")
    writer.add_uint64("fixture.u64", 2**63 + 5)
    writer.add_int64("fixture.i64", -(2**62))
    writer.add_float64("fixture.f64", -2.5e-300)
    writer.add_array("fixture.strings", ["a", "", "▁b", "<0x0A>"])
    writer.add_key_value("fixture.i32s", [1, -2, 3], gguf.GGUFValueType.ARRAY, sub_type=gguf.GGUFValueType.INT32)
    writer.add_key_value("fixture.f32s", [0.5, -1.0], gguf.GGUFValueType.ARRAY, sub_type=gguf.GGUFValueType.FLOAT32)
    writer.add_key_value("fixture.bools", [True, False], gguf.GGUFValueType.ARRAY, sub_type=gguf.GGUFValueType.BOOL)

    expected = {}
    tensors = {}
    f32 = float_values(rng)
    tensors["f32"] = (f32, None)
    tensors["f16"] = (float_values(rng).astype(np.float16), None)
    bf16 = float_values(rng).view(np.uint32)
    tensors["bf16"] = ((bf16 >> 16).astype(np.uint16), T.BF16)
    for qtype in SCALE_OFFSETS:
        tensors[qtype.name.lower()] = (quantized_bytes(rng, qtype), qtype)
    for name, (data, raw_dtype) in tensors.items():
        if raw_dtype is None:
            writer.add_tensor(name, data)
        else:
            writer.add_tensor(name, data, raw_dtype=raw_dtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()

    # Read back what was written, and dequantize it as gguf-py does.
    reader = gguf.GGUFReader(str(out / "types.gguf"))
    for tensor in reader.tensors:
        values = dequantize(tensor.data, tensor.tensor_type).astype(np.float32)
        expected[tensor.name] = np.ascontiguousarray(values.reshape(ROWS, COLS))
    save_file(expected, str(out / "types-expected.safetensors"))


def gemma3_text_config(**values) -> str:
    """config.json as transformers 5.23 writes it for these values (plus what save_pretrained adds)."""
    from transformers import Gemma3TextConfig
    config = Gemma3TextConfig(dtype="bfloat16", **values)
    config.architectures = ["Gemma3ForCausalLM"]
    return config.to_json_string()


# A 2-layer Gemma 3 in llama.cpp's layout: hidden 32, 2 query heads and 1 KV head of 16, MLP 64, and a
# 300-token SentencePiece vocabulary (control, user-defined, 256 byte pieces, normal pieces).
TINY = dict(vocab_size=300, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
            num_key_value_heads=1, head_dim=16, max_position_embeddings=128, rms_norm_eps=1e-6, sliding_window=8,
            query_pre_attn_scalar=16, bos_token_id=2, eos_token_id=1, pad_token_id=0)
TINY_SPECIAL = [("<pad>", 3), ("<eos>", 3), ("<bos>", 3), ("<unk>", 3), ("<mask>", 3), ("[multimodal]", 4),
                ("<start_of_turn>", 3), ("<end_of_turn>", 3), ("\n", 4), ("  ", 4)]
TINY_WORDS = ["\u2581", "h", "e", "l", "o", "w", "r", "d", "a", "t", "he", "ll", "llo", "hello", "\u2581hello",
              "\u2581w", "or", "\u2581wor", "ld", "\u2581world", "\u2581t", "\u2581the", "th"]


def tiny_tensors(rng: np.random.Generator) -> dict:
    """GGUF name -> (values in HF order, quantize?) for the tiny Gemma 3."""
    h, q, kv, ffn, v = 32, 32, 16, 64, 300
    tensors = {"token_embd.weight": (rng.normal(0, 1, (v, h)), True)}
    for i in range(2):
        b = f"blk.{i}."
        tensors[b + "attn_q.weight"] = (rng.normal(0, 0.2, (q, h)), True)
        tensors[b + "attn_k.weight"] = (rng.normal(0, 0.2, (kv, h)), False)
        tensors[b + "attn_v.weight"] = (rng.normal(0, 0.2, (kv, h)), False)
        tensors[b + "attn_output.weight"] = (rng.normal(0, 0.2, (h, q)), True)
        tensors[b + "attn_q_norm.weight"] = (1 + rng.normal(0, 0.2, (16,)), False)
        tensors[b + "attn_k_norm.weight"] = (1 + rng.normal(0, 0.2, (16,)), False)
        tensors[b + "ffn_gate.weight"] = (rng.normal(0, 0.2, (ffn, h)), True)
        tensors[b + "ffn_up.weight"] = (rng.normal(0, 0.2, (ffn, h)), True)
        tensors[b + "ffn_down.weight"] = (rng.normal(0, 0.2, (h, ffn)), True)
        for norm in ("attn_norm", "post_attention_norm", "ffn_norm", "post_ffw_norm"):
            tensors[b + norm + ".weight"] = (1 + rng.normal(0, 0.2, (h,)), False)
    tensors["output_norm.weight"] = (1 + rng.normal(0, 0.2, (h,)), False)
    return tensors


def write_tiny(path: pathlib.Path, arch: str = "gemma3", drop: str = "", extra: str = "", reshape: str = "") -> None:
    """The tiny Gemma 3; `drop`, `extra` and `reshape` name a tensor to leave out, add or give the wrong shape."""
    rng = np.random.default_rng(3)
    writer = gguf.GGUFWriter(str(path), arch=arch)
    writer.add_context_length(TINY["max_position_embeddings"])
    writer.add_embedding_length(TINY["hidden_size"])
    writer.add_block_count(TINY["num_hidden_layers"])
    writer.add_feed_forward_length(TINY["intermediate_size"])
    writer.add_head_count(TINY["num_attention_heads"])
    writer.add_head_count_kv(TINY["num_key_value_heads"])
    writer.add_key_length(TINY["head_dim"])
    writer.add_value_length(TINY["head_dim"])
    writer.add_layer_norm_rms_eps(TINY["rms_norm_eps"])
    writer.add_rope_freq_base(1e6)
    writer.add_sliding_window(TINY["sliding_window"])
    tokens = [t for t, _ in TINY_SPECIAL] + [f"<0x{b:02X}>" for b in range(256)] + TINY_WORDS
    tokens += [f"<unused{i}>" for i in range(TINY["vocab_size"] - len(tokens))]
    types = [k for _, k in TINY_SPECIAL] + [6] * 256 + [1] * len(TINY_WORDS)
    types += [3] * (len(tokens) - len(types))
    scores = [-1000.0] * len(TINY_SPECIAL) + [0.0] * 256 + [-float(i) for i in range(len(TINY_WORDS))]
    scores += [-1000.0] * (len(tokens) - len(scores))
    writer.add_tokenizer_model("llama")
    writer.add_tokenizer_pre("default")
    writer.add_token_list(tokens)
    writer.add_token_scores(scores)
    writer.add_token_types(types)
    writer.add_bos_token_id(2)
    writer.add_eos_token_id(1)
    writer.add_unk_token_id(3)
    writer.add_pad_token_id(0)
    writer.add_add_bos_token(True)
    writer.add_add_eos_token(False)
    writer.add_add_space_prefix(False)
    writer.add_chat_template("{{ bos_token }}{% for m in messages %}{{ m['content'] }}{% endfor %}")
    tensors = tiny_tensors(rng)
    if extra:
        tensors[extra] = (np.ones((32,)), False)
    for name, (values, quantize) in tensors.items():
        if name == drop:
            continue
        if name == reshape:
            values = values[:-1]
        values = values.astype(np.float32)
        if quantize and values.shape[-1] % 32 == 0:
            writer.add_tensor(name, gguf.quants.quantize(values, T.Q8_0), raw_dtype=T.Q8_0)
        else:
            writer.add_tensor(name, values)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def write_tiny_set(out: pathlib.Path) -> None:
    write_tiny(out / "gemma3-tiny.gguf")
    (out / "gemma3-tiny-config.json").write_text(gemma3_text_config(**TINY))
    write_tiny(out / "gemma3-tiny-llama.gguf", arch="llama")
    write_tiny(out / "gemma3-tiny-missing.gguf", drop="blk.1.ffn_up.weight")
    write_tiny(out / "gemma3-tiny-extra.gguf", extra="blk.1.attn_sinks.weight")
    write_tiny(out / "gemma3-tiny-shape.gguf", reshape="blk.0.attn_k.weight")
    # gguf-py's values of the tiny model, in HF names and order, for the dequantization of a whole model.
    reader = gguf.GGUFReader(str(out / "gemma3-tiny.gguf"))
    values = {}
    for tensor in reader.tensors:
        x = dequantize(tensor.data, tensor.tensor_type).astype(np.float32)
        values[tensor.name] = np.ascontiguousarray(x.reshape([int(d) for d in reversed(tensor.shape)]))
    save_file(values, str(out / "gemma3-tiny-values.safetensors"))


def write_fingerprint(out: pathlib.Path, real: pathlib.Path) -> None:
    reader = gguf.GGUFReader(str(real))
    # One tensor or two of each type the file uses: Q8_0, F32, Q5_0, Q4_K, Q6_K.
    wanted = ["token_embd.weight", "blk.0.attn_v.weight", "output_norm.weight", "blk.0.attn_norm.weight",
              "blk.0.attn_q.weight", "blk.17.ffn_up.weight", "blk.0.attn_output.weight", "blk.0.ffn_down.weight"]
    entries = []
    seen_types = set()
    for tensor in reader.tensors:
        if tensor.name not in wanted:
            continue
        values = dequantize(tensor.data, tensor.tensor_type).astype(np.float32).reshape(-1)
        seen_types.add(tensor.tensor_type.name)
        entries.append({
            "name": tensor.name,
            "type": tensor.tensor_type.name,
            "dims": [int(d) for d in tensor.shape],
            "first": [float(v) for v in values[:16]],
            "sum": float(values.astype(np.float64).sum()),
            "abs_sum": float(np.abs(values.astype(np.float64)).sum()),
        })
    doc = {"file": real.name, "types": sorted(seen_types), "tensors": entries}
    (out / "gemma3-270m-fingerprint.json").write_text(json.dumps(doc, indent=1) + "\n")
    # The 270M's config.json as transformers writes it, from the values the GGUF holds or llama.cpp
    # infers (query_pre_attn_scalar = key_length; sliding RoPE 10000 and one full layer in 6 are
    # Gemma3TextConfig's defaults too).
    field = lambda key: reader.fields[key].parts[reader.fields[key].data[0]][0]
    (out / "gemma3-270m-config.json").write_text(gemma3_text_config(
        vocab_size=len(reader.fields["tokenizer.ggml.tokens"].data),
        hidden_size=int(field("gemma3.embedding_length")),
        intermediate_size=int(field("gemma3.feed_forward_length")),
        num_hidden_layers=int(field("gemma3.block_count")),
        num_attention_heads=int(field("gemma3.attention.head_count")),
        num_key_value_heads=int(field("gemma3.attention.head_count_kv")),
        head_dim=int(field("gemma3.attention.key_length")),
        max_position_embeddings=int(field("gemma3.context_length")),
        # The FLOAT32 1e-6 written as the shortest decimal that round-trips it, as temper writes it.
        rms_norm_eps=float(str(np.float32(field("gemma3.attention.layer_norm_rms_epsilon")))),
        sliding_window=int(field("gemma3.attention.sliding_window")),
        query_pre_attn_scalar=int(field("gemma3.attention.key_length")),
        rope_parameters={"full_attention": {"rope_type": "default", "rope_theta": float(field("gemma3.rope.freq_base"))},
                         "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}},
        bos_token_id=int(field("tokenizer.ggml.bos_token_id")),
        eos_token_id=int(field("tokenizer.ggml.eos_token_id")),
        pad_token_id=int(field("tokenizer.ggml.padding_token_id"))))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=pathlib.Path)
    parser.add_argument("--real", type=pathlib.Path, help="the real Gemma 3 270M GGUF, for its fingerprint")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    write_types(args.out)
    write_tiny_set(args.out)
    if args.real:
        write_fingerprint(args.out, args.real)


if __name__ == "__main__":
    main()
