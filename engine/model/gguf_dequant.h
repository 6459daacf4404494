// Dequantization of GGUF tensors: ggml's block formats back to fp32, then to bf16.
//
// Each format follows ggml's reference dequantizer (ggml/src/ggml-quants.c, dequantize_row_*)
// operation for operation in fp32, so the values are bit-identical to ggml's and to gguf-py's
// gguf.quants.dequantize (tests/data/gguf/ holds fixtures made with the latter). The file is
// compiled with -ffp-contract=off so that no multiply-add is fused into an FMA, which would round
// differently. Supported: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K; any other
// type is refused (Unimplemented, naming the type).
//
// The bf16 result is rounded as engine/model/bf16.h rounds (to nearest, ties to even), the way
// torch's `.to(torch.bfloat16)` would round gguf-py's fp32 values.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <span>

#include "common/status.h"
#include "engine/model/gguf_file.h"

namespace temper::engine {

bool CanDequantize(GgmlType type);

// Dequantizes `out.size()` values of `type` from `data`, which must hold exactly that many values'
// blocks. Errors: Unimplemented for a type this does not dequantize; InvalidArgument when the
// sizes disagree (a count that is not a whole number of blocks, or the wrong byte count).
Status DequantizeToF32(GgmlType type, std::span<const uint8_t> data, std::span<float> out);

// The same, rounded to bf16 after `subtract` is taken off each fp32 value (GGUF stores Gemma's
// norm weights as 1 + w; pass 1 to get w back). Works in chunks, so it needs no fp32 copy of the
// whole tensor.
Status DequantizeToBf16(GgmlType type, std::span<const uint8_t> data, std::span<uint16_t> out, float subtract = 0);

// IEEE half to float, exact (subnormals, infinities and NaN included).
float HalfToFloat(uint16_t h);

}  // namespace temper::engine
