#include "engine/cuda/reference_ops.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "engine/cuda/kernel_math.h"

namespace temper::engine::cuda {

using math::Bf16ToFloat;

ReferenceOps::ReferenceOps(Communicator& comm, int rank, size_t memory_limit)
    : comm_(comm), rank_(rank), memory_limit_(memory_limit) {}

ReferenceOps::~ReferenceOps() {
  for (auto& [p, bytes] : blocks_) std::free(p);
}

Result<void*> ReferenceOps::Alloc(size_t bytes) {
  const size_t rounded = (std::max<size_t>(bytes, 1) + 255) / 256 * 256;
  if (allocated_ + rounded > memory_limit_) {
    return Status::ResourceExhausted(fmt::format("reference device {}: {} B wanted, {} B of {} B left", rank_, rounded,
                                                 memory_limit_ - allocated_, memory_limit_));
  }
  void* p = std::aligned_alloc(256, rounded);
  if (!p)
    return Status::ResourceExhausted(
        fmt::format("reference device {}: host allocation of {} B failed", rank_, rounded));
  // Fresh device memory holds garbage, never zeros: poison it so a read of unwritten memory shows.
  std::memset(p, 0xff, rounded);
  blocks_[p] = rounded;
  allocated_ += rounded;
  return p;
}

void ReferenceOps::Free(void* p) {
  auto it = blocks_.find(p);
  if (it == blocks_.end()) return;
  allocated_ -= it->second;
  std::free(p);
  blocks_.erase(it);
}

Status ReferenceOps::CopyToDevice(void* dst, const void* host, size_t bytes) {
  std::memcpy(dst, host, bytes);
  return Status::OK();
}

Status ReferenceOps::CopyRowsToDevice(void* dst, const void* host, size_t host_pitch, size_t row_bytes, size_t rows) {
  for (size_t r = 0; r < rows; ++r) {
    std::memcpy(static_cast<char*>(dst) + r * row_bytes, static_cast<const char*>(host) + r * host_pitch, row_bytes);
  }
  return Status::OK();
}

Status ReferenceOps::CopyToHost(void* host, const void* src, size_t bytes) {
  std::memcpy(host, src, bytes);
  return Status::OK();
}

Status ReferenceOps::CopyRowsToHost(void* host, size_t host_pitch, const void* src, size_t row_bytes, size_t rows) {
  for (size_t r = 0; r < rows; ++r) {
    std::memcpy(static_cast<char*>(host) + r * host_pitch, static_cast<const char*>(src) + r * row_bytes, row_bytes);
  }
  return Status::OK();
}

Status ReferenceOps::CopyOnDevice(void* dst, const void* src, size_t bytes) {
  std::memmove(dst, src, bytes);
  return Status::OK();
}

Status ReferenceOps::FillSynthetic(uint16_t* dst, int64_t n, uint64_t seed, float mean, float halfwidth) {
  for (int64_t i = 0; i < n; ++i) {
    dst[i] =
        math::FloatToBf16(mean + halfwidth * (2.0f * math::SyntheticUniform(seed, static_cast<uint64_t>(i)) - 1.0f));
  }
  return Status::OK();
}

Status ReferenceOps::Embed(const int32_t* tokens, int rows, const uint16_t* table, int vocab_begin, int vocab_end,
                           int hidden, float scale, float* x) {
  for (int r = 0; r < rows; ++r) {
    float* xr = x + int64_t{r} * hidden;
    if (tokens[r] >= vocab_begin && tokens[r] < vocab_end) {
      const uint16_t* e = table + int64_t{tokens[r] - vocab_begin} * hidden;
      for (int i = 0; i < hidden; ++i) xr[i] = Bf16ToFloat(e[i]) * scale;
    } else {
      std::fill(xr, xr + hidden, 0.0f);
    }
  }
  return Status::OK();
}

namespace {

float RmsScaleOf(const float* x, int n, float eps) {
  float sum_sq = 0;
  for (int i = 0; i < n; ++i) sum_sq += x[i] * x[i];
  return math::RmsScale(sum_sq, n, eps);
}

// out = RmsNorm(x) · (w_offset + w) over one row of n (w null: no weight), then RoPE at `pos` when
// `rope` has tables and pos >= 0, then · out_scale (the query's score scale; 1 elsewhere).
void NormRow(const float* x, float* out, const uint16_t* w, float w_offset, int n, float eps, const RopeView* rope,
             int64_t pos, float out_scale = 1.0f) {
  const float scale = RmsScaleOf(x, n, eps);
  for (int i = 0; i < n; ++i) {
    const float v = x[i] * scale;
    out[i] = w ? v * (w_offset + Bf16ToFloat(w[i])) : v;
  }
  if (rope && rope->cos && pos >= 0) {
    const float* c = rope->cos + pos * rope->angles;
    const float* s = rope->sin + pos * rope->angles;
    for (int j = 0; j < rope->angles; ++j) math::RopePair(out[j], out[j + n / 2], c[j], s[j]);
  }
  if (out_scale != 1.0f) {
    for (int i = 0; i < n; ++i) out[i] *= out_scale;
  }
}

float Dot(const float* x, const uint16_t* w, int in) {
  float s = 0;
  for (int i = 0; i < in; ++i) s += x[i] * Bf16ToFloat(w[i]);
  return s;
}

}  // namespace

Status ReferenceOps::RmsNorm(const float* x, float* out, const uint16_t* w, int rows, int n, float eps,
                             float weight_offset) {
  for (int r = 0; r < rows; ++r) {
    NormRow(x + int64_t{r} * n, out + int64_t{r} * n, w, weight_offset, n, eps, nullptr, -1);
  }
  return Status::OK();
}

Status ReferenceOps::QkvNorm(const KvLayerView& kv, float* q, float* k, float* v, const uint16_t* q_norm, int rows,
                             int q_heads, float eps, const RowTables& t, bool write_kv) {
  const int hd = kv.head_dim;
  for (int r = 0; r < rows; ++r) {
    const int64_t pos = t.positions[r];
    for (int h = 0; h < q_heads; ++h) {
      float* head = q + (int64_t{r} * q_heads + h) * hd;
      NormRow(head, head, q_norm, kv.norm_offset, hd, eps, &kv.rope, pos, kv.score_scale);
    }
    for (int h = 0; h < kv.kv_heads; ++h) {
      const int64_t at = (int64_t{r} * kv.kv_heads + h) * hd;
      if (kv.k) {
        NormRow(k + at, k + at, kv.k_norm, kv.norm_offset, hd, eps, &kv.rope, pos);
        if (kv.value_norm) NormRow(v + at, v + at, nullptr, 0.0f, hd, eps, nullptr, -1);
      } else {
        NormRow(k + at, v + at, nullptr, 0.0f, hd, eps, nullptr, -1);
      }
    }
  }
  return write_kv ? KvWrite(kv, k, v, rows, t) : Status::OK();
}

Status ReferenceOps::NormResidual(float* x, const float* branch, const uint16_t* w, int rows, int n, float eps,
                                  float scale, const uint16_t* next_w, float* next_out, float weight_offset) {
  for (int r = 0; r < rows; ++r) {
    float* xr = x + int64_t{r} * n;
    const float* br = branch + int64_t{r} * n;
    const float inv = RmsScaleOf(br, n, eps);
    for (int i = 0; i < n; ++i) xr[i] = (xr[i] + (br[i] * inv) * (weight_offset + Bf16ToFloat(w[i]))) * scale;
    if (next_out) NormRow(xr, next_out + int64_t{r} * n, next_w, weight_offset, n, eps, nullptr, -1);
  }
  return Status::OK();
}

Status ReferenceOps::Geglu(float* gate, const float* up, int64_t n) {
  for (int64_t i = 0; i < n; ++i) gate[i] = math::GeluTanh(gate[i]) * up[i];
  return Status::OK();
}

Status ReferenceOps::Gemv(const float* x, const GemvParts& parts, int rows, int in) {
  if (rows < 1 || rows > 8) return Status::InvalidArgument(fmt::format("GEMV: {} rows (1-8)", rows));
  for (int p = 0; p < GemvParts::kMax; ++p) {
    for (int o = 0; o < parts.width[p]; ++o) {
      for (int r = 0; r < rows; ++r) {
        parts.y[p][int64_t{r} * parts.width[p] + o] = Dot(x + int64_t{r} * in, parts.w[p] + int64_t{o} * in, in);
      }
    }
  }
  return Status::OK();
}

Status ReferenceOps::GemvGeglu(const float* x, const uint16_t* gate, const uint16_t* up, float* y, int rows, int in,
                               int out) {
  if (rows < 1 || rows > 8) return Status::InvalidArgument(fmt::format("GEMV GeGLU: {} rows (1-8)", rows));
  for (int r = 0; r < rows; ++r) {
    const float* xr = x + int64_t{r} * in;
    for (int o = 0; o < out; ++o) {
      const float g = Dot(xr, gate + int64_t{o} * in, in), u = Dot(xr, up + int64_t{o} * in, in);
      y[int64_t{r} * out + o] = math::GeluTanh(g) * u;
    }
  }
  return Status::OK();
}

Status ReferenceOps::ToBf16(const float* x, uint16_t* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = math::FloatToBf16(x[i]);
  return Status::OK();
}

Status ReferenceOps::Gemm(const uint16_t* x, int64_t ldx, const uint16_t* w, int64_t ldw, float* y, int64_t ldy,
                          int rows, int in, int out) {
  const GemmShape shape = GemmShapeOf(x, ldx, w, ldw, y, ldy, rows, in, out);
  if (std::find(gemm_shapes_.begin(), gemm_shapes_.end(), shape) == gemm_shapes_.end()) gemm_shapes_.push_back(shape);
  for (int r = 0; r < rows; ++r) {
    for (int o = 0; o < out; ++o) {
      const uint16_t* xr = x + int64_t{r} * ldx;
      const uint16_t* wr = w + int64_t{o} * ldw;
      float s = 0;
      for (int i = 0; i < in; ++i) s += Bf16ToFloat(xr[i]) * Bf16ToFloat(wr[i]);
      y[int64_t{r} * ldy + o] = s;
    }
  }
  return Status::OK();
}

Status ReferenceOps::GatherRows(const float* x, int64_t width, const int32_t* index, int n, float* out) {
  for (int i = 0; i < n; ++i) std::memcpy(out + i * width, x + int64_t{index[i]} * width, width * sizeof(float));
  return Status::OK();
}

Status ReferenceOps::Softcap(float* y, int64_t ld, int rows, int n, float cap) {
  for (int r = 0; r < rows; ++r) {
    for (int i = 0; i < n; ++i) y[r * ld + i] = math::Softcap(y[r * ld + i], cap);
  }
  return Status::OK();
}

Status ReferenceOps::KvWrite(const KvLayerView& kv, const float* k, const float* v, int rows, const RowTables& t) {
  const int width = kv.kv_heads * kv.head_dim;
  for (int r = 0; r < rows; ++r) {
    const int64_t pos = t.positions[r];
    if (math::KvWriteSkips(pos, kv.sliding, kv.ring, t.chunk_end[r])) continue;
    const int slot = t.slots[r];
    const int64_t row =
        math::KvRow(pos, kv.sliding, kv.ring, slot, t.blocks + int64_t{slot} * t.max_blocks, kv.block_tokens);
    for (int i = 0; i < width; ++i) {
      kv.v[row * width + i] = math::FloatToBf16(v[int64_t{r} * width + i]);
      if (kv.k) kv.k[row * width + i] = math::FloatToBf16(k[int64_t{r} * width + i]);
    }
  }
  return Status::OK();
}

Status ReferenceOps::Attention(const KvLayerView& kv, const float* q, const float* k, const float* v, float* out,
                               int rows, const RowTables& t, const HeadRange& heads, int splits, float* /*partials*/) {
  const int hd = kv.head_dim;
  const int width = kv.kv_heads * hd;
  // Keys the kernel takes at once (attention_kernel.h's kTileKeys): its online softmax rescales
  // once a tile.
  constexpr int kTileKeys = 16;
  std::vector<float> query(hd), key(hd), acc(hd), tile_values(static_cast<size_t>(kTileKeys) * hd), scores(kTileKeys);
  for (int r = 0; r < rows; ++r) {
    const int64_t pos = t.positions[r];
    for (int h = 0; h < heads.q_heads; ++h) {
      float* o = out + (int64_t{r} * heads.q_heads + h) * hd;
      if (pos < 0) {
        std::fill(o, o + hd, 0.0f);
        continue;
      }
      const int kvh = (heads.q_head_begin + h) / heads.group - heads.kv_head_begin;
      const float* qh = q + (int64_t{r} * heads.q_heads + h) * hd;
      const int slot = t.slots[r];
      const int32_t* table = t.blocks + int64_t{slot} * t.max_blocks;
      const int64_t lo = math::WindowStart(pos, kv.window, kv.sliding);
      // The keys are cut into splits as the kernel cuts them and the splits merged as its merge
      // does (weights from the largest split maximum); within a split the kernel goes in tiles of
      // kTileKeys keys with bf16 queries, keys and softmax weights (its MMA operands), and so does
      // this, so the two agree to fp32 rounding.
      for (int d = 0; d < hd; ++d) query[d] = math::RoundToBf16(qh[d]);
      const int used = math::UsedSplits(pos - lo + 1, splits);
      std::vector<math::SoftmaxState> states(used);
      std::vector<float> split_acc(static_cast<size_t>(used) * hd);
      for (int split = 0; split < used; ++split) {
        const math::SplitSpan span = math::SplitPositions(pos, kv.window, kv.sliding, splits, split);
        math::SoftmaxState state{-INFINITY, 0.0f};
        std::fill(acc.begin(), acc.end(), 0.0f);
        for (int64_t base = span.begin; base < span.end; base += kTileKeys) {
          const int n = static_cast<int>(std::min<int64_t>(kTileKeys, span.end - base));
          float tile_max = -INFINITY;
          for (int j = 0; j < n; ++j) {
            const int64_t p = base + j;
            const int64_t offset = int64_t{kvh} * hd;
            float* value = tile_values.data() + int64_t{j} * hd;
            if (p >= t.chunk_start[r]) {
              const int64_t fr = t.first_row[r] + (p - t.chunk_start[r]);
              for (int d = 0; d < hd; ++d) {
                value[d] = math::RoundToBf16(v[fr * width + offset + d]);
                if (kv.k) key[d] = math::RoundToBf16(k[fr * width + offset + d]);
              }
            } else {
              const int64_t row = math::KvRow(p, kv.sliding, kv.ring, slot, table, kv.block_tokens);
              for (int d = 0; d < hd; ++d) {
                value[d] = Bf16ToFloat(kv.v[row * width + offset + d]);
                if (kv.k) key[d] = Bf16ToFloat(kv.k[row * width + offset + d]);
              }
            }
            if (!kv.k) {  // K = RoPE(V ⊙ k_norm) in fp32, then rounded as the kernel's operand
              for (int d = 0; d < hd; ++d) key[d] = value[d] * Bf16ToFloat(kv.k_norm[d]);
              const float* c = kv.rope.cos + p * kv.rope.angles;
              const float* s = kv.rope.sin + p * kv.rope.angles;
              for (int i = 0; i < kv.rope.angles; ++i) math::RopePair(key[i], key[i + hd / 2], c[i], s[i]);
              for (int d = 0; d < hd; ++d) key[d] = math::RoundToBf16(key[d]);
            }
            float dot = 0;
            for (int d = 0; d < hd; ++d) dot += query[d] * key[d];
            scores[j] = dot;
            tile_max = std::max(tile_max, dot);
          }
          const float m_new = std::max(state.max, tile_max);
          const float scale = state.max > -INFINITY ? std::exp(state.max - m_new) : 0.0f;
          state.sum *= scale;
          for (int d = 0; d < hd; ++d) acc[d] *= scale;
          for (int j = 0; j < n; ++j) {
            const float weight = math::RoundToBf16(std::exp(scores[j] - m_new));
            state.sum += weight;
            const float* value = tile_values.data() + int64_t{j} * hd;
            for (int d = 0; d < hd; ++d) acc[d] += weight * value[d];
          }
          state.max = m_new;
        }
        states[split] = state;
        std::copy(acc.begin(), acc.end(), split_acc.begin() + int64_t{split} * hd);
      }
      float m = -INFINITY;
      for (const math::SoftmaxState& st : states) m = std::max(m, st.max);
      float denominator = 0;
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (int split = 0; split < used; ++split) {
        const float w = math::SplitWeight(states[split], m);
        denominator += w * states[split].sum;
        for (int d = 0; d < hd; ++d) acc[d] += w * split_acc[int64_t{split} * hd + d];
      }
      for (int d = 0; d < hd; ++d) o[d] = denominator > 0 ? acc[d] / denominator : 0.0f;
    }
  }
  return Status::OK();
}

Status ReferenceOps::TopCandidates(const float* logits, int64_t ld, int rows, int n, int k, int index_offset,
                                   const float* temperatures, float* out_vals, int32_t* out_ids, float* out_max,
                                   float* out_mass, void* /*scratch*/) {
  if (rows < 1 || k < 1 || k > n || k > 256) {
    return Status::InvalidArgument(
        fmt::format("top candidates: rows {}, n {}, k {} (1 <= k <= min(n, 256))", rows, n, k));
  }
  ReferenceTopCandidates(logits, ld, rows, n, k, index_offset, temperatures, out_vals, out_ids, out_max, out_mass);
  return Status::OK();
}

Status ReferenceOps::AllReduceSum(float* data, size_t n) {
  comm_.AllReduceSum(rank_, data, n);
  return Status::OK();
}

Status ReferenceOps::Capture(int key, const std::function<Status()>& step) {
  if (!captured_.emplace(key, step).second) {
    return Status::AlreadyExists(fmt::format("reference device {}: step {} is already captured", rank_, key));
  }
  return Status::OK();
}

Status ReferenceOps::Replay(int key) {
  auto it = captured_.find(key);
  if (it == captured_.end()) {
    return Status::NotFound(fmt::format("reference device {}: step {} was never captured", rank_, key));
  }
  return it->second();
}

}  // namespace temper::engine::cuda
