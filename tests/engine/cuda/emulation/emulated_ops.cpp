#include "engine/cuda/emulation/emulated_ops.h"

#include "engine/cuda/kernels.h"

namespace temper::engine::cuda {

// The stream every launch gets: the emulator runs each grid to its end before the call returns.
constexpr cudaStream_t kNoStream = nullptr;

Status EmulatedOps::FillSynthetic(uint16_t* dst, int64_t n, uint64_t seed, float mean, float halfwidth) {
  return LaunchFillSynthetic(dst, n, seed, mean, halfwidth, kNoStream);
}

Status EmulatedOps::Embed(const int32_t* tokens, int rows, const uint16_t* table, int vocab_begin, int vocab_end,
                          int hidden, float scale, float* x) {
  return LaunchEmbed(tokens, rows, table, vocab_begin, vocab_end, hidden, scale, x, kNoStream);
}

Status EmulatedOps::RmsNorm(const float* x, float* out, const uint16_t* w, int rows, int n, float eps,
                            float weight_offset) {
  return LaunchRmsNorm(x, out, w, rows, n, eps, weight_offset, kNoStream);
}

Status EmulatedOps::QkvNorm(const KvLayerView& kv, float* q, float* k, float* v, const uint16_t* q_norm, int rows,
                            int q_heads, float eps, const RowTables& t, bool write_kv) {
  return LaunchQkvNorm(kv, q, k, v, q_norm, rows, q_heads, eps, t, write_kv, kNoStream);
}

Status EmulatedOps::NormResidual(float* x, const float* branch, const uint16_t* w, int rows, int n, float eps,
                                 float scale, const uint16_t* next_w, float* next_out, float weight_offset) {
  return LaunchNormResidual(x, branch, w, rows, n, eps, scale, next_w, next_out, weight_offset, kNoStream);
}

Status EmulatedOps::Geglu(float* gate, const float* up, int64_t n) { return LaunchGeglu(gate, up, n, kNoStream); }

Status EmulatedOps::Gemv(const float* x, const GemvParts& parts, int rows, int in) {
  return LaunchGemvBf16(x, parts, rows, in, kNoStream);
}

Status EmulatedOps::GemvGeglu(const float* x, const uint16_t* gate, const uint16_t* up, float* y, int rows, int in,
                              int out) {
  return LaunchGemvGeglu(x, gate, up, y, rows, in, out, kNoStream);
}

Status EmulatedOps::ToBf16(const float* x, uint16_t* y, int64_t n) { return LaunchToBf16(x, y, n, kNoStream); }

Status EmulatedOps::GatherRows(const float* x, int64_t width, const int32_t* index, int n, float* out) {
  return LaunchGatherRows(x, width, index, n, out, kNoStream);
}

Status EmulatedOps::Softcap(float* y, int64_t ld, int rows, int n, float cap) {
  return LaunchSoftcap(y, ld, rows, n, cap, kNoStream);
}

Status EmulatedOps::KvWrite(const KvLayerView& kv, const float* k, const float* v, int rows, const RowTables& t) {
  return LaunchKvWrite(kv, k, v, rows, t, kNoStream);
}

Status EmulatedOps::Attention(const KvLayerView& kv, const float* q, const float* k, const float* v, float* out,
                              int rows, const RowTables& t, const HeadRange& heads, int splits, float* partials) {
  // As CudaOps::Attention: `splits` is the pass's most; fewer fill this GPU at this batch.
  const int used = AttentionSplits(kEmulatedSmCount, kv.kv_heads, heads.group, splits);
  return LaunchAttention(kv, q, k, v, out, rows, t, heads, used, partials, kNoStream);
}

Status EmulatedOps::TopCandidates(const float* logits, int64_t ld, int rows, int n, int k, int index_offset,
                                  const float* temperatures, float* out_vals, int32_t* out_ids, float* out_max,
                                  float* out_mass, void* scratch) {
  return LaunchTopCandidates(logits, ld, rows, n, k, index_offset, temperatures, out_vals, out_ids, out_max, out_mass,
                             scratch, kNoStream);
}

}  // namespace temper::engine::cuda
