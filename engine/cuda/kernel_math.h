// The scalar math of the CUDA kernels, compiled for both host and device so that the CPU tests
// (tests/engine/cuda/cuda_kernel_math_test.cpp) check the exact functions the kernels call against the
// CPU reference forward (engine/cpu/forward.cpp): KV addressing in the sliding ring and the paged
// pool, the window bounds, the split-KV ranges and the merge of partial softmaxes, RoPE pairs,
// GELU-tanh, the RMSNorm scale and the final softcap.
//
// Thread safety: pure functions.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define TEMPER_HD __host__ __device__ __forceinline__
#else
#define TEMPER_HD inline
#endif

namespace temper::engine::cuda::math {

TEMPER_HD float Bf16ToFloat(uint16_t h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
#endif
}

// Point 2 of the fixture README: x · (mean(x²) + eps)^-½.
TEMPER_HD float RmsScale(float sum_sq, int n, float eps) { return 1.0f / sqrtf(sum_sq / static_cast<float>(n) + eps); }

// Point 10: gelu_pytorch_tanh.
TEMPER_HD float GeluTanh(float x) {
  const float k = 0.7978845608028654f;
  return 0.5f * x * (1.0f + tanhf(k * (x + 0.044715f * x * x * x)));
}

// Point 8: rotate_half on the pair (j, j + head_dim/2).
TEMPER_HD void RopePair(float& x1, float& x2, float c, float s) {
  const float a = x1, b = x2;
  x1 = a * c - b * s;
  x2 = b * c + a * s;
}

TEMPER_HD float Softcap(float x, float cap) { return cap > 0 ? cap * tanhf(x / cap) : x; }

// engine/model/bf16.h's FloatToBf16 for device code too (round to nearest even, NaN stays NaN): what the
// KV cache and the GEMM operands hold.
TEMPER_HD uint16_t FloatToBf16(float x) {
  uint32_t u;
#if defined(__CUDA_ARCH__)
  u = __float_as_uint(x);
#else
  std::memcpy(&u, &x, sizeof u);
#endif
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
TEMPER_HD float RoundToBf16(float x) { return Bf16ToFloat(FloatToBf16(x)); }

// A uniform draw in [0, 1) for element i of a synthetic tensor: splitmix64 of (seed, i), so any
// thread computes any element without shared generator state.
TEMPER_HD float SyntheticUniform(uint64_t seed, uint64_t i) {
  uint64_t z = seed * 0x9e3779b97f4a7c15ull + i + 1;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return static_cast<float>(z >> 40) * (1.0f / 16777216.0f);
}

// Point 7: the first position a query at `pos` sees (the window is strict).
TEMPER_HD int64_t WindowStart(int64_t pos, int window, bool sliding) {
  return sliding && pos - window + 1 > 0 ? pos - window + 1 : 0;
}

// Row of the cache holding `pos`: row pos % ring of the sequence's ring (`ring` rows) on sliding
// layers, else the paged row blocks[pos / block_tokens] * block_tokens + pos % block_tokens.
TEMPER_HD int64_t KvRow(int64_t pos, bool sliding, int ring, int ring_slot, const int32_t* blocks, int block_tokens) {
  if (sliding) return static_cast<int64_t>(ring_slot) * ring + pos % ring;
  return static_cast<int64_t>(blocks[pos / block_tokens]) * block_tokens + pos % block_tokens;
}

// Whether a KV write skips the row at `pos`: padding rows, and on sliding layers the rows a later
// row of the same item overwrites in the ring (pos < chunk_end − ring), so no two rows of a pass
// write one ring row.
TEMPER_HD bool KvWriteSkips(int64_t pos, bool sliding, int ring, int64_t chunk_end) {
  return pos < 0 || (sliding && pos < chunk_end - ring);
}

// Split `i` of `splits` over n keys: [begin, end), contiguous, sizes differ by at most one.
struct SplitSpan {
  int64_t begin, end;
};
TEMPER_HD SplitSpan SplitKeys(int64_t n, int splits, int i) { return {n * i / splits, n * (i + 1) / splits}; }

// How many of `splits` a row of n keys uses: each used split gets at least kMinKeysPerSplit keys
// (fewer only when n itself is smaller), so a graph captured with many splits wastes no merge work
// on short contexts. Splits beyond the used ones are empty.
constexpr int64_t kMinKeysPerSplit = 32;
TEMPER_HD int UsedSplits(int64_t n, int splits) {
  const int64_t wanted = n / kMinKeysPerSplit;
  return static_cast<int>(wanted < 1 ? 1 : (wanted < splits ? wanted : splits));
}

// The keys that split `split` of `splits` takes for a query at `pos`: positions [begin, end) of
// its visible keys; none for a padding row (pos < 0) or a split past the used ones.
TEMPER_HD SplitSpan SplitPositions(int64_t pos, int window, bool sliding, int splits, int split) {
  if (pos < 0) return {0, 0};
  const int64_t lo = WindowStart(pos, window, sliding);
  const int used = UsedSplits(pos - lo + 1, splits);
  if (split >= used) return {0, 0};
  const SplitSpan span = SplitKeys(pos - lo + 1, used, split);
  return {lo + span.begin, lo + span.end};
}

// The query heads one attention block takes: of a rank's q_heads local heads (the first being
// global head q_head_begin, `group` to a KV head), chunk `chunk` of at most `per_block` of those
// that read global KV head `kv_head`: local heads [first, first + count), count <= 0 for none.
struct HeadSpan {
  int first, count;
};
TEMPER_HD HeadSpan BlockHeads(int q_heads, int q_head_begin, int group, int kv_head, int chunk, int per_block) {
  const int begin = kv_head * group - q_head_begin > 0 ? kv_head * group - q_head_begin : 0;
  const int end = (kv_head + 1) * group - q_head_begin < q_heads ? (kv_head + 1) * group - q_head_begin : q_heads;
  const int first = begin + chunk * per_block;
  return {first, end - first < per_block ? end - first : per_block};
}

// Online softmax state of one split: the largest score seen and Σ exp(score - max). An empty
// split has max = -inf and sum = 0 and contributes nothing to a merge.
struct SoftmaxState {
  float max;
  float sum;
};
// Folds `b` into `a`; returns the factors to scale a's and b's value accumulators by.
TEMPER_HD void MergeSoftmax(SoftmaxState& a, const SoftmaxState& b, float& scale_a, float& scale_b) {
  const float m = a.max > b.max ? a.max : b.max;
  scale_a = a.sum > 0 ? expf(a.max - m) : 0.0f;
  scale_b = b.sum > 0 ? expf(b.max - m) : 0.0f;
  a.sum = a.sum * scale_a + b.sum * scale_b;
  a.max = m;
}

// A split's weight when the splits of a row are merged at once: exp(max − m), m the largest of
// their maxima; an empty split weighs nothing. The merged row is Σ weight · acc / Σ weight · sum.
TEMPER_HD float SplitWeight(const SoftmaxState& s, float m) { return s.sum > 0 ? expf(s.max - m) : 0.0f; }

}  // namespace temper::engine::cuda::math
