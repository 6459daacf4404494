#include "bench/decode_step_kernels.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <random>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "bench/decode_step_gemvs.h"
#include "bench/gpu_timing.h"
#include "engine/cuda/cuda_ops.h"
#include "engine/cuda/device_rank.h"
#include "engine/cuda/kernels.h"
#include "engine/kv_cache.h"
#include "engine/thread_pool.h"

namespace temper::bench {
namespace {

using engine::LayerGeometry;
using engine::LayerKind;
using engine::LayerShard;
using engine::ModelConfig;
using engine::RankShard;
namespace cuda = engine::cuda;

// Enough copies of a weight or KV set to exceed an H100's 50 MB L2 (and an L4's 48 MB) five times.
constexpr double kRotateBytes = 256.0 * 1024 * 1024;
// Launches in the graph of a kernel that reads nothing large.
constexpr int kLatencyLaunches = 50;

int Copies(double bytes) { return static_cast<int>(std::clamp(std::ceil(kRotateBytes / bytes), 1.0, 128.0)); }

// Device memory for one kernel's timing, freed when it goes out of scope.
class Arena {
 public:
  explicit Arena(cudaStream_t stream) : stream_(stream) {}
  ~Arena() {
    cudaStreamSynchronize(stream_);
    for (void* p : owned_) cudaFree(p);
  }
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;

  template <typename T>
  Result<T*> Alloc(size_t n) {
    void* p = nullptr;
    TEMPER_CUDA_TRY(cudaMalloc(&p, sizeof(T) * std::max<size_t>(n, 1)));
    owned_.push_back(p);
    return static_cast<T*>(p);
  }
  // Seeded uniform bf16 in [-halfwidth, halfwidth], filled on the device (a 704 MB LM head would
  // take seconds to draw on the host).
  Result<uint16_t*> Bf16(size_t n, uint64_t seed, float halfwidth = 0.05f) {
    TEMPER_ASSIGN_OR_RETURN(uint16_t * p, Alloc<uint16_t>(n));
    TEMPER_RETURN_IF_ERROR(cuda::LaunchFillSynthetic(p, static_cast<int64_t>(n), seed, 0.0f, halfwidth, stream_));
    return p;
  }
  template <typename T>
  Result<T*> Upload(const std::vector<T>& host) {
    TEMPER_ASSIGN_OR_RETURN(T * p, Alloc<T>(host.size()));
    TEMPER_CUDA_TRY(cudaMemcpyAsync(p, host.data(), sizeof(T) * host.size(), cudaMemcpyHostToDevice, stream_));
    TEMPER_CUDA_TRY(cudaStreamSynchronize(stream_));  // `host` may go right after
    return p;
  }
  // Normal(0, scale) fp32 values: activations are never zeros.
  Result<float*> Floats(size_t n, uint32_t seed, float scale = 1.0f) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> d(0.0f, scale);
    std::vector<float> host(n);
    for (float& v : host) v = d(rng);
    return Upload(host);
  }

 private:
  cudaStream_t stream_;
  std::vector<void*> owned_;
};

class StepTimer {
 public:
  StepTimer(const ModelConfig& c, const RankShard& shard, const DecodeStepShape& shape, cudaStream_t stream)
      : c_(c), shard_(shard), shape_(shape), stream_(stream) {}

  std::vector<StepKernel>& kernels() { return kernels_; }

  // One decode row through one GEMV launch of the step (q, k and v as parts of one launch, as
  // rank_forward.cpp runs them; gate_proj and up_proj with the GeGLU in the epilogue).
  Status Gemv(const StepGemv& g) {
    Arena a(stream_);
    TEMPER_ASSIGN_OR_RETURN(GemvInputs in, Inputs(a, g, 1));
    return Add(
        Label(g), g.per_step, g.Bytes(), in.Launches(), [&](int i) { return in.Engine(i, stream_); },
        [&](int) { return in.EngineMinimal(stream_); });
  }

  // Split-KV attention of one row at `context` over layer `l`'s cache (rotating over sequence
  // slots, so each launch reads another sequence's keys), its minimal size at 16 keys, and before
  // it the q/k/v norms with RoPE and the KV write of the row's fresh key and value (latency-bound).
  Status Attention(int l, int per_step) {
    Arena a(stream_);
    TEMPER_ASSIGN_OR_RETURN(AttentionInputs in, AttentionSetup(a, l, 1));
    const cuda::KvLayerView& kv = in.kv;
    const int splits = in.splits, q_heads = in.heads.q_heads, hd = kv.head_dim;
    float *q = in.q, *k = in.k, *v = in.v, *out = in.out, *partials = in.partials;
    // The norms rewrite q, k and v in place: normed values stay normed, so repeats are alike.
    TEMPER_RETURN_IF_ERROR(Latency(
        fmt::format("q/k/v norms + RoPE + KV write {} ({} q, {} KV heads x {})", in.kind, q_heads, kv.kv_heads, hd),
        per_step, [&](int) {
          return cuda::LaunchQkvNorm(kv, q, k, v, in.q_norm, 1, q_heads, c_.rms_norm_eps, in.Tables(0), true, stream_);
        }));
    auto launch = [&](int i) {
      return cuda::LaunchAttention(kv, q, k, v, out, 1, in.Tables(i), in.heads, splits, partials, stream_);
    };
    auto minimal = [&](int) {
      return cuda::LaunchAttention(kv, q, k, v, out, 1, in.Minimal(), in.heads, splits, partials, stream_);
    };
    const std::string name = fmt::format("attention {} ({} q heads, {} KV heads x {}, {} keys, {} splits)", in.kind,
                                         q_heads, kv.kv_heads, hd, in.visible, splits);
    const double bytes = in.row_bytes;
    TEMPER_RETURN_IF_ERROR(Add(name, per_step, bytes, in.Launches(), launch, minimal));
    if (splits == 1) return Status::OK();
    // The merge alone, on the partials the last launch left: how much of the attention is the
    // second kernel's.
    Result<double> merge = MicrosPerLaunchInGraph(stream_, kLatencyLaunches, [&](int) {
      return cuda::LaunchAttentionMerge(partials, out, 1, q_heads, hd, splits, in.at_ctx, kv.window, kv.sliding,
                                        stream_);
    });
    if (!merge.ok()) return merge.status().WithContext("the merge of " + name);
    std::printf("* %s: the merge of its splits alone %.1f us of the %.1f us\n", name.c_str(), *merge,
                kernels_.back().us);
    return Status::OK();
  }

  // The same attention for `rows` rows a launch, each another sequence at `context`: with each
  // row's own split count (the engine's, whatever the rows), and with the fewer splits that
  // filled the GPU for `rows` rows, which the engine took until 2026-11-27 and which made a row's
  // sums depend on the rows beside it. What keeping a row's splits costs a batch.
  Result<BatchAttention> AttentionBatch(int l, int per_step, int rows) {
    Arena a(stream_);
    TEMPER_ASSIGN_OR_RETURN(AttentionInputs in, AttentionSetup(a, l, rows));
    BatchAttention b{fmt::format("attention {} ({} q heads, {} KV heads x {}, {} keys)", in.kind, in.heads.q_heads,
                                 in.kv.kv_heads, in.kv.head_dim, in.visible),
                     per_step,
                     rows,
                     in.splits,
                     in.splits_for_rows,
                     0,
                     0};
    for (const bool own : {true, false}) {
      const int splits = own ? in.splits : in.splits_for_rows;
      TEMPER_ASSIGN_OR_RETURN((own ? b.own_us : b.for_rows_us),
                              MicrosPerLaunchInGraph(stream_, in.Launches(), [&](int i) {
                                return cuda::LaunchAttention(in.kv, in.q, in.k, in.v, in.out, rows, in.Tables(i),
                                                             in.heads, splits, in.partials, stream_);
                              }));
    }
    return b;
  }

  // Layer `l`'s attention for a prefill chunk of `rows` rows of one sequence, at positions 0 ..
  // rows - 1 over the chunk's own fresh keys, in one split as prefill passes run it. Its keys stay
  // in L2 as a real prefill's do: no copies to rotate over.
  Result<PrefillAttention> AttentionPrefill(int l, int per_pass, int rows) {
    const LayerGeometry& g = c_.layers[l];
    const LayerShard& ls = shard_.layers[l];
    const bool sliding = g.kind == LayerKind::kSliding;
    const int hd = g.head_dim, kv_heads = ls.kv_heads.size(), q_heads = ls.q_heads.size();
    const int64_t width = int64_t{kv_heads} * hd;
    Arena a(stream_);
    cuda::KvLayerView kv;
    // The cache is never read (every key is fresh) but a layer has one.
    TEMPER_ASSIGN_OR_RETURN(kv.v, a.Bf16(width, ++seed_, 1.0f));
    if (!g.k_eq_v) {
      TEMPER_ASSIGN_OR_RETURN(kv.k, a.Bf16(width, ++seed_, 1.0f));
    }
    TEMPER_ASSIGN_OR_RETURN(uint16_t * k_norm, a.Bf16(hd, ++seed_, 1.0f));
    kv.k_norm = k_norm;
    kv.sliding = sliding;
    kv.window = c_.sliding_window;
    kv.ring = engine::RingSlots(c_);
    kv.kv_heads = kv_heads;
    kv.head_dim = hd;
    kv.block_tokens = shape_.block_tokens;
    const size_t angles = std::max(g.rope_angles, 1);
    TEMPER_ASSIGN_OR_RETURN(float* cos, a.Floats(size_t(rows) * angles, ++seed_));
    TEMPER_ASSIGN_OR_RETURN(float* sin, a.Floats(size_t(rows) * angles, ++seed_));
    kv.rope = cuda::RopeView{cos, sin, g.rope_angles};
    std::vector<int64_t> positions(size_t(3) * rows, 0);  // positions, chunk starts (0), chunk ends
    for (int r = 0; r < rows; ++r) positions[r] = r, positions[2 * rows + r] = rows;
    TEMPER_ASSIGN_OR_RETURN(int64_t * at, a.Upload(positions));
    TEMPER_ASSIGN_OR_RETURN(int32_t * zeros, a.Upload(std::vector<int32_t>(size_t(rows), 0)));  // slots, first rows
    const cuda::RowTables t{.positions = at,
                            .slots = zeros,
                            .chunk_start = at + rows,
                            .first_row = zeros,
                            .chunk_end = at + 2 * rows,
                            .blocks = zeros,
                            .max_blocks = 1};
    const cuda::HeadRange heads{q_heads, ls.q_heads.begin, c_.num_heads / g.num_kv_heads, ls.kv_heads.begin};
    TEMPER_ASSIGN_OR_RETURN(float* q, a.Floats(size_t(rows) * q_heads * hd, ++seed_));
    TEMPER_ASSIGN_OR_RETURN(float* k, a.Floats(size_t(rows) * width, ++seed_));
    TEMPER_ASSIGN_OR_RETURN(float* v, a.Floats(size_t(rows) * width, ++seed_));
    TEMPER_ASSIGN_OR_RETURN(float* out, a.Alloc<float>(size_t(rows) * q_heads * hd));
    PrefillAttention p{
        fmt::format("attention {} ({} q heads, {} KV heads x {})", sliding ? "sliding" : "full", q_heads, kv_heads, hd),
        per_pass, rows, 0};
    Result<double> us = MicrosPerLaunchInGraph(
        stream_, 5, [&](int) { return cuda::LaunchAttention(kv, q, k, v, out, rows, t, heads, 1, nullptr, stream_); });
    if (!us.ok()) return us.status().WithContext("prefill " + p.name);
    p.us = *us;
    return p;
  }

  // What every layer does besides its attention and projections, and the head's small kernels.
  Status RowKernels(int layers) {
    const int H = c_.hidden_size, vocab = shard_.vocab.size();
    const float eps = c_.rms_norm_eps;
    Arena a(stream_);
    TEMPER_ASSIGN_OR_RETURN(uint16_t * w, a.Bf16(H, ++seed_, 1.0f));
    TEMPER_ASSIGN_OR_RETURN(float* x, a.Floats(H, ++seed_));
    TEMPER_ASSIGN_OR_RETURN(float* xn, a.Alloc<float>(H));
    TEMPER_ASSIGN_OR_RETURN(float* branch, a.Floats(H, ++seed_));
    TEMPER_ASSIGN_OR_RETURN(uint16_t * next_w, a.Bf16(H, ++seed_, 1.0f));
    // The first layer's input norm, and the final norm.
    TEMPER_RETURN_IF_ERROR(Latency(fmt::format("RMSNorm of the hidden row ({})", H), 2,
                                   [&](int) { return cuda::LaunchRmsNorm(x, xn, w, 1, H, eps, 0.0f, stream_); }));
    // Twice per layer: the sandwich norm and residual, then the next input norm (the last layer's
    // second has none; timed with it).
    TEMPER_RETURN_IF_ERROR(Latency(fmt::format("RMSNorm + residual + next RMSNorm ({})", H), 2 * layers, [&](int) {
      return cuda::LaunchNormResidual(x, branch, w, 1, H, eps, 1.0f, next_w, xn, 0.0f, stream_);
    }));

    // The head: embedding row (vocab-parallel), gather of the logit row, final softcap, candidates.
    TEMPER_ASSIGN_OR_RETURN(uint16_t * table, a.Bf16(size_t(vocab) * H, ++seed_));
    TEMPER_ASSIGN_OR_RETURN(int32_t * token, a.Upload(std::vector<int32_t>{shard_.vocab.begin + vocab / 3}));
    TEMPER_RETURN_IF_ERROR(Latency(fmt::format("embedding row ({})", H), 1, [&](int) {
      return cuda::LaunchEmbed(token, 1, table, shard_.vocab.begin, shard_.vocab.end, H, c_.embed_scale, x, stream_);
    }));
    TEMPER_ASSIGN_OR_RETURN(int32_t * index, a.Upload(std::vector<int32_t>{0}));
    TEMPER_RETURN_IF_ERROR(Latency(fmt::format("gather of the logit row ({})", H), 1,
                                   [&](int) { return cuda::LaunchGatherRows(x, H, index, 1, xn, stream_); }));
    TEMPER_ASSIGN_OR_RETURN(float* logits, a.Floats(vocab, ++seed_, 10.0f));
    if (c_.final_logit_softcapping > 0) {
      TEMPER_RETURN_IF_ERROR(Latency(fmt::format("softcap of the logits ({})", vocab), 1, [&](int) {
        return cuda::LaunchSoftcap(logits, vocab, 1, vocab, c_.final_logit_softcapping, stream_);
      }));
    }
    const int k = shape_.top_candidates;
    if (k > 0) {
      TEMPER_ASSIGN_OR_RETURN(float* temperature, a.Upload(std::vector<float>{1.0f}));
      TEMPER_ASSIGN_OR_RETURN(float* vals, a.Alloc<float>(k));
      TEMPER_ASSIGN_OR_RETURN(int32_t * ids, a.Alloc<int32_t>(k));
      TEMPER_ASSIGN_OR_RETURN(float* max, a.Alloc<float>(1));
      TEMPER_ASSIGN_OR_RETURN(float* mass, a.Alloc<float>(1));
      TEMPER_ASSIGN_OR_RETURN(char* scratch, a.Alloc<char>(cuda::TopCandidatesScratchBytes(1, vocab, k)));
      TEMPER_RETURN_IF_ERROR(Latency(fmt::format("top {} candidates of {} logits", k, vocab), 1, [&](int) {
        return cuda::LaunchTopCandidates(logits, vocab, 1, vocab, k, shard_.vocab.begin, temperature, vals, ids, max,
                                         mass, scratch, stream_);
      }));
    }
    return Status::OK();
  }

 private:
  template <typename Launch, typename Minimal>
  Status Add(const std::string& name, int per_step, double bytes, int launches, Launch launch, Minimal minimal) {
    Result<double> us = MicrosPerLaunchInGraph(stream_, launches, launch);
    if (!us.ok()) return us.status().WithContext(name);
    Result<double> fixed = MicrosPerLaunchInGraph(stream_, kLatencyLaunches, minimal);
    if (!fixed.ok()) return fixed.status().WithContext(name + " at its minimal size");
    kernels_.push_back({name, per_step, StepCost::kBandwidth, bytes, *us, std::min(*fixed, *us)});
    return Status::OK();
  }
  // One layer kind's attention inputs for `rows` rows a launch, each row another sequence at
  // `context`, over enough sequences' caches that L2 cannot serve a repeat.
  struct AttentionInputs {
    std::string kind;  // "sliding" or "full"
    cuda::KvLayerView kv;
    cuda::HeadRange heads;
    int rows = 0, sequences = 0, blocks = 0;
    int splits = 0;           // a row's, as CudaOps::Attention chooses them on this GPU
    int splits_for_rows = 0;  // what filled the GPU for `rows` rows (the engine's rule before 2026-11-27)
    int64_t visible = 0;      // keys a row attends to
    double row_bytes = 0;     // a row's keys and values, bf16
    int32_t* slots = nullptr;
    int32_t* table = nullptr;
    int64_t* at_ctx = nullptr;  // positions, chunk starts, chunk ends: `rows` each, at the context's end
    int64_t* at_16 = nullptr;   // the same for one row at 16 keys
    int32_t* first_row = nullptr;
    float *q = nullptr, *k = nullptr, *v = nullptr, *out = nullptr, *partials = nullptr;
    uint16_t* q_norm = nullptr;

    // Launch i's rows: sequences rows·i, rows·i + 1, ... (modulo the sequences held).
    cuda::RowTables Tables(int i) const { return TablesAt(at_ctx, slots + (size_t(i) * rows) % sequences, rows); }
    cuda::RowTables Minimal() const { return TablesAt(at_16, slots, 1); }
    int Launches() const { return std::max(sequences / rows, 20); }
    cuda::RowTables TablesAt(const int64_t* at, const int32_t* slot, int n) const {
      return cuda::RowTables{.positions = at,
                             .slots = slot,
                             .chunk_start = at + n,
                             .first_row = first_row,
                             .chunk_end = at + 2 * n,
                             .blocks = table,
                             .max_blocks = blocks};
    }
  };
  Result<AttentionInputs> AttentionSetup(Arena& a, int l, int rows) {
    const LayerGeometry& g = c_.layers[l];
    const LayerShard& ls = shard_.layers[l];
    const bool sliding = g.kind == LayerKind::kSliding;
    const int hd = g.head_dim, kv_heads = ls.kv_heads.size(), q_heads = ls.q_heads.size(), bt = shape_.block_tokens;
    const int64_t width = int64_t{kv_heads} * hd, ctx = shape_.context;
    AttentionInputs in;
    in.kind = sliding ? "sliding" : "full";
    in.rows = rows;
    in.visible = sliding ? std::min<int64_t>(ctx, c_.sliding_window) : ctx;
    in.row_bytes = 2.0 * in.visible * width * (g.k_eq_v ? 1 : 2);  // bf16 V, and K unless k_eq_v
    in.sequences = Copies(in.row_bytes * rows) * rows;
    in.blocks = static_cast<int>((ctx + bt - 1) / bt);
    const int64_t rows_per_sequence = sliding ? engine::RingSlots(c_) : int64_t{in.blocks} * bt;
    std::vector<float> cos(size_t(ctx) * std::max(g.rope_angles, 1)), sin(cos.size());
    std::mt19937 rng(++seed_);
    std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
    for (size_t i = 0; i < cos.size(); ++i) cos[i] = unit(rng), sin[i] = unit(rng);
    TEMPER_ASSIGN_OR_RETURN(float* cos_d, a.Upload(cos));
    TEMPER_ASSIGN_OR_RETURN(float* sin_d, a.Upload(sin));
    cuda::KvLayerView& kv = in.kv;
    TEMPER_ASSIGN_OR_RETURN(kv.v, a.Bf16(size_t(in.sequences) * rows_per_sequence * width, ++seed_, 1.0f));
    if (!g.k_eq_v) {
      TEMPER_ASSIGN_OR_RETURN(kv.k, a.Bf16(size_t(in.sequences) * rows_per_sequence * width, ++seed_, 1.0f));
    }
    TEMPER_ASSIGN_OR_RETURN(uint16_t * k_norm, a.Bf16(hd, ++seed_, 1.0f));
    kv.k_norm = k_norm;
    kv.sliding = sliding;
    kv.window = c_.sliding_window;
    kv.ring = engine::RingSlots(c_);
    kv.kv_heads = kv_heads;
    kv.head_dim = hd;
    kv.block_tokens = bt;
    kv.rope = cuda::RopeView{cos_d, sin_d, g.rope_angles};
    // Slot s is sequence s: its ring, or its block-table row of blocks s·blocks ... (s+1)·blocks - 1.
    std::vector<int32_t> slots(static_cast<size_t>(in.sequences)), table(size_t(in.sequences) * in.blocks);
    for (int s = 0; s < in.sequences; ++s) slots[s] = s;
    for (size_t i = 0; i < table.size(); ++i) table[i] = static_cast<int32_t>(i);
    TEMPER_ASSIGN_OR_RETURN(in.slots, a.Upload(slots));
    TEMPER_ASSIGN_OR_RETURN(in.table, a.Upload(table));
    // Every row at position ctx - 1 (this step's token), its chunk [ctx - 1, ctx), in its own row;
    // and one row at 15 for the minimal size.
    std::vector<int64_t> at_ctx(size_t(3) * rows, ctx - 1);
    for (int r = 0; r < rows; ++r) at_ctx[2 * rows + r] = ctx;
    std::vector<int32_t> first_row(static_cast<size_t>(rows));
    for (int r = 0; r < rows; ++r) first_row[r] = r;
    TEMPER_ASSIGN_OR_RETURN(in.at_ctx, a.Upload(at_ctx));
    TEMPER_ASSIGN_OR_RETURN(in.at_16, a.Upload(std::vector<int64_t>{15, 15, 16}));
    TEMPER_ASSIGN_OR_RETURN(in.first_row, a.Upload(first_row));
    in.heads = cuda::HeadRange{q_heads, ls.q_heads.begin, c_.num_heads / g.num_kv_heads, ls.kv_heads.begin};
    int device = 0, sm_count = 0;
    TEMPER_CUDA_TRY(cudaGetDevice(&device));
    TEMPER_CUDA_TRY(cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, device));
    in.splits = cuda::AttentionSplits(sm_count, kv_heads, in.heads.group, shape_.decode_splits);
    // The old rule counted every row's blocks: what AttentionSplits gives `rows` times the KV heads.
    in.splits_for_rows = cuda::AttentionSplits(sm_count, kv_heads * rows, in.heads.group, shape_.decode_splits);
    TEMPER_ASSIGN_OR_RETURN(in.q, a.Floats(size_t(rows) * q_heads * hd, ++seed_));
    TEMPER_ASSIGN_OR_RETURN(in.k, a.Floats(size_t(rows) * width, ++seed_));
    TEMPER_ASSIGN_OR_RETURN(in.v, a.Floats(size_t(rows) * width, ++seed_));
    TEMPER_ASSIGN_OR_RETURN(in.out, a.Alloc<float>(size_t(rows) * q_heads * hd));
    TEMPER_ASSIGN_OR_RETURN(in.partials, a.Alloc<float>(size_t(rows) * q_heads * in.splits * (hd + 2)));
    TEMPER_ASSIGN_OR_RETURN(in.q_norm, a.Bf16(hd, ++seed_, 1.0f));
    return in;
  }

  // A step GEMV's device inputs, over enough copies of its weights that L2 cannot serve a repeat:
  // each copy all its weight rows, the parts one after another (gate, then up).
  struct GemvInputs {
    const StepGemv* g = nullptr;
    int rows = 0, in = 0, copies = 0, outputs = 0, weight_rows = 0;
    uint16_t* w = nullptr;
    float* x = nullptr;
    float* y = nullptr;  // the outputs, part after part, [rows][width] each

    size_t OutputFloats() const { return size_t(rows) * outputs; }
    int Launches() const { return std::max(copies, 20); }  // in a timed graph: every copy, at least 20
    // The engine's launch on copy i.
    Status Engine(int i, cudaStream_t stream) const {
      const uint16_t* at = w + size_t(i % copies) * weight_rows * in;
      if (g->geglu) return cuda::LaunchGemvGeglu(x, at, at + size_t(outputs) * in, y, rows, in, outputs, stream);
      cuda::GemvParts parts;
      float* out = y;
      for (int width : g->widths) {
        parts.Add(at, out, width);
        at += size_t(width) * in;
        out += size_t(rows) * width;
      }
      return cuda::LaunchGemvBf16(x, parts, rows, in, stream);
    }
    // The SIMT kernel at its minimal size: the first 64 outputs of the first part (or of gate and
    // up).
    Status EngineMinimal(cudaStream_t stream) const {
      const int tiny = std::min(g->widths[0], 64);
      if (g->geglu) return cuda::LaunchGemvGeglu(x, w, w + size_t(outputs) * in, y, rows, in, tiny, stream);
      return cuda::LaunchGemvBf16(x, cuda::GemvParts().Add(w, y, tiny), rows, in, stream);
    }
  };
  Result<GemvInputs> Inputs(Arena& a, const StepGemv& g, int rows) {
    GemvInputs in;
    in.g = &g;
    in.rows = rows;
    in.in = g.in;
    in.copies = Copies(g.Bytes());
    in.weight_rows = g.WeightRows();
    in.outputs = g.geglu ? g.widths[0] : in.weight_rows;
    TEMPER_ASSIGN_OR_RETURN(in.w, a.Bf16(size_t(in.copies) * in.weight_rows * g.in, ++seed_));
    TEMPER_ASSIGN_OR_RETURN(in.x, a.Floats(size_t(rows) * g.in, ++seed_));
    TEMPER_ASSIGN_OR_RETURN(in.y, a.Alloc<float>(in.OutputFloats()));
    return in;
  }
  static std::string Label(const StepGemv& g) {
    if (g.geglu) return fmt::format("GEMV {} + GeGLU 2x{}x{}", g.name, g.widths[0], g.in);
    std::string shape;
    for (int w : g.widths) shape += fmt::format("{}{}", shape.empty() ? "" : "+", w);
    return fmt::format("GEMV {} {}x{}", g.name, shape, g.in);
  }

  template <typename Launch>
  Status Latency(const std::string& name, int per_step, Launch launch) {
    Result<double> us = MicrosPerLaunchInGraph(stream_, kLatencyLaunches, launch);
    if (!us.ok()) return us.status().WithContext(name);
    kernels_.push_back({name, per_step, StepCost::kLatency, 0, *us, 0});
    return Status::OK();
  }

  const ModelConfig& c_;
  const RankShard& shard_;
  const DecodeStepShape& shape_;
  cudaStream_t stream_;
  uint64_t seed_ = 1000;
  std::vector<StepKernel> kernels_;
};

// The host's part of a decode step, as DeviceBackend::Forward does it with one thread per rank
// (all ranks on `device` here): upload the pass inputs and the sequence's block-table row, launch
// the step's graph (here a one-element GeGLU), then download each rank's candidates and wait.
// Median wall time of 200 steps after 20 warm-up steps.
Result<StepKernel> TimeStepHost(const RankShard& shard, int device, const DecodeStepShape& shape) {
  const int tp = shard.tp, k = std::max(shape.top_candidates, 1);
  cuda::RankLimits limits;
  limits.max_rows = shape.max_rows;
  limits.max_context = shape.context + 1;
  limits.block_tokens = shape.block_tokens;
  const size_t input_bytes = cuda::PassInputLayout(limits).bytes;
  const size_t table_bytes = sizeof(int32_t) * limits.max_blocks();
  struct Rank {
    std::unique_ptr<cuda::CudaOps> ops;
    std::vector<void*> owned;
    void *inputs = nullptr, *table = nullptr, *vals = nullptr, *ids = nullptr, *max = nullptr, *mass = nullptr;
    float* gate = nullptr;
    std::vector<char> host_inputs, host_table, host_out;
  };
  std::vector<Rank> ranks(static_cast<size_t>(tp));
  auto cleanup = [&] {
    for (Rank& r : ranks) {
      if (!r.ops) continue;
      (void)r.ops->Synchronize();
      for (void* p : r.owned) r.ops->Free(p);
    }
  };
  auto setup = [&]() -> Status {
    for (int i = 0; i < tp; ++i) {
      Rank& r = ranks[i];
      // Ordinary edges: this times the host's part, for the L4 (which has no programmatic launch).
      TEMPER_ASSIGN_OR_RETURN(r.ops, cuda::CudaOps::Create(device, i, nullptr, {.programmatic_edges = false}));
      auto alloc = [&](size_t bytes) -> Result<void*> {
        TEMPER_ASSIGN_OR_RETURN(void* p, r.ops->Alloc(bytes));
        r.owned.push_back(p);
        return p;
      };
      TEMPER_ASSIGN_OR_RETURN(r.inputs, alloc(input_bytes));
      TEMPER_ASSIGN_OR_RETURN(r.table, alloc(table_bytes));
      TEMPER_ASSIGN_OR_RETURN(r.vals, alloc(sizeof(float) * k));
      TEMPER_ASSIGN_OR_RETURN(r.ids, alloc(sizeof(int32_t) * k));
      TEMPER_ASSIGN_OR_RETURN(r.max, alloc(sizeof(float)));
      TEMPER_ASSIGN_OR_RETURN(r.mass, alloc(sizeof(float)));
      TEMPER_ASSIGN_OR_RETURN(void* gate, alloc(2 * sizeof(float)));
      r.gate = static_cast<float*>(gate);
      const float ones[2] = {0.5f, 0.5f};
      TEMPER_RETURN_IF_ERROR(r.ops->CopyToDevice(r.gate, ones, sizeof(ones)));
      r.host_inputs.assign(input_bytes, 1);
      r.host_table.assign(table_bytes, 0);
      r.host_out.assign(2 * sizeof(float) * k + 2 * sizeof(float), 0);
      TEMPER_RETURN_IF_ERROR(r.ops->Synchronize());
    }
    return Status::OK();
  };
  engine::WorkerGroup group(tp);
  std::vector<Status> status(static_cast<size_t>(tp));
  auto on_ranks = [&](const std::function<Status(Rank&)>& fn) -> Status {
    group.Run([&](int r) { status[r] = fn(ranks[r]); });
    for (int r = 0; r < tp; ++r) {
      if (!status[r].ok()) return status[r].WithContext(fmt::format("rank {}", r));
    }
    return Status::OK();
  };
  // RunPassOnRanks, then GatherCandidates (device_backend.cpp).
  auto launch = [&](Rank& r) -> Status {
    TEMPER_RETURN_IF_ERROR(r.ops->CopyToDevice(r.inputs, r.host_inputs.data(), input_bytes));
    TEMPER_RETURN_IF_ERROR(r.ops->CopyToDevice(r.table, r.host_table.data(), table_bytes));
    return r.ops->Replay(0);
  };
  auto download = [&](Rank& r) -> Status {
    char* h = r.host_out.data();
    TEMPER_RETURN_IF_ERROR(r.ops->CopyToHost(h, r.vals, sizeof(float) * k));
    TEMPER_RETURN_IF_ERROR(r.ops->CopyToHost(h + sizeof(float) * k, r.ids, sizeof(int32_t) * k));
    TEMPER_RETURN_IF_ERROR(r.ops->CopyToHost(h + 2 * sizeof(float) * k, r.max, sizeof(float)));
    TEMPER_RETURN_IF_ERROR(r.ops->CopyToHost(h + 2 * sizeof(float) * k + sizeof(float), r.mass, sizeof(float)));
    return r.ops->Synchronize();
  };
  auto step = [&]() -> Status {
    TEMPER_RETURN_IF_ERROR(on_ranks(launch));
    return on_ranks(download);
  };
  std::vector<double> us;
  auto run = [&]() -> Status {
    TEMPER_RETURN_IF_ERROR(setup());
    // A one-kernel graph stands in for the step's, captured on every rank before any replays it.
    TEMPER_RETURN_IF_ERROR(on_ranks([](Rank& r) {
      float* gate = r.gate;
      cuda::RankOps* ops = r.ops.get();
      return r.ops->Capture(0, [ops, gate] { return ops->Geglu(gate, gate + 1, 1); });
    }));
    for (int i = 0; i < 220; ++i) {
      const auto t0 = Clock::now();
      TEMPER_RETURN_IF_ERROR(step());
      if (i >= 20) us.push_back(1e6 * Seconds(t0, Clock::now()));
    }
    return Status::OK();
  };
  const Status s = run();
  cleanup();
  if (!s.ok()) return s.WithContext("host part of a decode step");
  return StepKernel{fmt::format("host: pass upload ({} KB), graph launch, candidates download, sync; {} rank threads",
                                input_bytes / 1024, tp),
                    1,
                    StepCost::kLatency,
                    0,
                    Median(std::move(us)),
                    0};
}

// The kernels `time(timer)` times with a StepTimer on a fresh stream of `device`.
template <typename Time>
Result<std::vector<StepKernel>> TimeOnStream(const ModelConfig& c, const RankShard& shard, int device,
                                             const DecodeStepShape& shape, Time&& time) {
  TEMPER_CUDA_TRY(cudaSetDevice(device));
  cudaStream_t stream = nullptr;
  TEMPER_CUDA_TRY(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  StepTimer t(c, shard, shape, stream);
  const Status s = time(t);
  cudaStreamDestroy(stream);
  TEMPER_RETURN_IF_ERROR(s);
  return std::move(t.kernels());
}

}  // namespace

Result<std::vector<StepKernel>> TimeDecodeAttention(const ModelConfig& c, const RankShard& shard, int device,
                                                    const DecodeStepShape& shape) {
  TEMPER_ASSIGN_OR_RETURN(std::vector<StepKernel> timed,
                          TimeOnStream(c, shard, device, shape, [&](StepTimer& t) -> Status {
                            for (const LayerKindSpan& span : LayerKinds(c)) {
                              TEMPER_RETURN_IF_ERROR(t.Attention(span.first, span.count));
                            }
                            return Status::OK();
                          }));
  std::vector<StepKernel> attention;
  for (StepKernel& k : timed) {
    if (k.cost == StepCost::kBandwidth) attention.push_back(std::move(k));  // not the norms before each
  }
  return attention;
}

Result<std::vector<BatchAttention>> TimeDecodeAttentionBatch(const ModelConfig& c, const RankShard& shard, int device,
                                                             const DecodeStepShape& shape, int rows) {
  std::vector<BatchAttention> timed;
  TEMPER_RETURN_IF_ERROR(TimeOnStream(c, shard, device, shape, [&](StepTimer& t) -> Status {
                           for (const LayerKindSpan& span : LayerKinds(c)) {
                             TEMPER_ASSIGN_OR_RETURN(BatchAttention one,
                                                     t.AttentionBatch(span.first, span.count, rows));
                             timed.push_back(std::move(one));
                           }
                           return Status::OK();
                         }).status());
  return timed;
}

Result<std::vector<PrefillAttention>> TimePrefillAttention(const ModelConfig& c, const RankShard& shard, int device,
                                                           int rows) {
  std::vector<PrefillAttention> timed;
  TEMPER_RETURN_IF_ERROR(TimeOnStream(c, shard, device, DecodeStepShape{}, [&](StepTimer& t) -> Status {
                           for (const LayerKindSpan& span : LayerKinds(c)) {
                             TEMPER_ASSIGN_OR_RETURN(PrefillAttention one,
                                                     t.AttentionPrefill(span.first, span.count, rows));
                             timed.push_back(std::move(one));
                           }
                           return Status::OK();
                         }).status());
  return timed;
}

Result<std::vector<StepKernel>> TimeDecodeStepKernels(const ModelConfig& c, const RankShard& shard, int device,
                                                      const DecodeStepShape& shape) {
  auto run = [&](StepTimer& t) -> Status {
    for (const LayerKindSpan& span : LayerKinds(c)) TEMPER_RETURN_IF_ERROR(t.Attention(span.first, span.count));
    for (const StepGemv& g : DecodeStepGemvs(c, shard)) TEMPER_RETURN_IF_ERROR(t.Gemv(g));
    return t.RowKernels(c.num_layers);
  };
  TEMPER_ASSIGN_OR_RETURN(std::vector<StepKernel> out, TimeOnStream(c, shard, device, shape, run));
  TEMPER_ASSIGN_OR_RETURN(StepKernel host, TimeStepHost(shard, device, shape));
  out.push_back(std::move(host));
  return out;
}

}  // namespace temper::bench
