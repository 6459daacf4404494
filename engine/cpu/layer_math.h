// The per-vector arithmetic of the Gemma 4 and Gemma 3 decoders on the CPU, shared by the target's
// forward pass (forward.cpp) and the MTP drafter's (draft_forward.cpp). The numbered points refer
// to "Subtle points of the Gemma 4 text decoder" in the golden fixtures' README.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>

#include "engine/cpu/rank.h"
#include "engine/model/bf16.h"

namespace temper::engine::cpu {

// Point 2: out = x · (mean(x²) + eps)^-½ · (weight_offset + w): Gemma 4 uses w as is (offset 0),
// Gemma 3 multiplies by 1 + w in fp32 (offset 1, ModelConfig::norm_weight_offset). An empty w is
// the weightless v_norm (point 3).
inline void RmsNorm(float* out, const float* x, std::span<const uint16_t> w, int n, float eps, float weight_offset) {
  double sum_sq = 0;
  for (int i = 0; i < n; ++i) sum_sq += static_cast<double>(x[i]) * x[i];
  const float inv = 1.0f / std::sqrt(static_cast<float>(sum_sq / n) + eps);
  if (w.empty()) {
    for (int i = 0; i < n; ++i) out[i] = x[i] * inv;
  } else {
    for (int i = 0; i < n; ++i) out[i] = (x[i] * inv) * (weight_offset + Bf16ToFloat(w[i]));
  }
}

// Point 8: rotate_half pairs dim j with dim j + head_dim/2; only the first `angles` pairs rotate
// (for proportional RoPE that is [0, angles) with [hd/2, hd/2 + angles): two separate blocks).
inline void Rope(float* x, const RopeTable& t, int64_t pos) {
  const int half = t.head_dim / 2;
  const float* c = t.cos.data() + pos * t.angles;
  const float* s = t.sin.data() + pos * t.angles;
  for (int j = 0; j < t.angles; ++j) {
    const float x1 = x[j], x2 = x[j + half];
    x[j] = x1 * c[j] - x2 * s[j];
    x[j + half] = x2 * c[j] + x1 * s[j];
  }
}

// Point 10: gelu_pytorch_tanh, not the erf GELU.
inline float GeluTanh(float x) {
  const float kSqrt2OverPi = 0.7978845608028654f;
  return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * (x + 0.044715f * x * x * x)));
}

inline float Dot(const float* a, const float* b, int n) {
  float s = 0;
  for (int i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

// The cached key of `layer` at `pos`, KV head `kvh` (local): stored, or on a k_eq_v layer, which
// caches V only, rebuilt into `rebuilt` as RoPE(V ⊙ k_norm.weight) at the key's position (point 6).
inline const float* CachedKey(RankContext& rank, int seq, int layer, int64_t pos, std::span<const int32_t> blocks,
                              int kvh, float* rebuilt) {
  const int hd = rank.config->layers[layer].head_dim;
  if (rank.kv->StoresK(layer)) return rank.kv->K(seq, layer, pos, blocks) + kvh * hd;
  const float* v = rank.kv->V(seq, layer, pos, blocks) + kvh * hd;
  const std::span<const uint16_t> k_norm = rank.weights->layer(layer).k_norm;
  for (int d = 0; d < hd; ++d) rebuilt[d] = v[d] * Bf16ToFloat(k_norm[d]);
  Rope(rebuilt, *rank.layers[layer].rope, pos);
  return rebuilt;
}

// out[hd] = Σ_i softmax(scores)[i] · value(lo + i): the second half of attention, once each key's
// score (point 4: q·k with scaling 1.0, no softcap) is in `scores`, which it overwrites.
template <typename ValueAt>
void SoftmaxCombine(std::span<float> scores, int64_t lo, const ValueAt& value, int hd, float* out) {
  const float max = *std::max_element(scores.begin(), scores.end());
  float sum = 0;
  for (float& s : scores) sum += (s = std::exp(s - max));
  std::fill(out, out + hd, 0.0f);
  for (size_t i = 0; i < scores.size(); ++i) {
    const float p = scores[i] / sum;
    const float* v = value(lo + static_cast<int64_t>(i));
    for (int d = 0; d < hd; ++d) out[d] += p * v[d];
  }
}

}  // namespace temper::engine::cpu
