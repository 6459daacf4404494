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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=pathlib.Path)
    parser.add_argument("--real", type=pathlib.Path, help="the real Gemma 3 270M GGUF, for its fingerprint")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    write_types(args.out)
    if args.real:
        write_fingerprint(args.out, args.real)


if __name__ == "__main__":
    main()
