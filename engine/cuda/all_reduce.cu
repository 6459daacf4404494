// DeviceAllReduce (all_reduce.h): the one-shot kernel, the P2P transfer test and NCCL loaded at
// run time.
//
// The one-shot kernel follows all_reduce_protocol.h step by step (push, wait, sum, end), which is
// also where the argument for its correctness lives; tests/engine/cuda/all_reduce_protocol_test.cpp runs
// the same rules with threads on the host. The kernels of all ranks must run at once: grids are small
// (at most kMaxBlocks blocks of kThreads threads per rank), so even 8 ranks on one GPU are
// co-resident. A spin that outlasts Options::spin_limit_ms (20 s) records the stall and traps: a lost
// peer kills the context rather than hanging the GPU for ever.
#include "engine/cuda/all_reduce.h"

#include <cuda_runtime.h>
#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include "engine/cuda/all_reduce_protocol.h"
#include "engine/cuda/cuda_status.h"
#include "engine/cuda/kernel_loading.h"

namespace temper::engine::cuda {
namespace {

using detail::S;

using all_reduce::CallState;
using all_reduce::kMaxBlocks;
using all_reduce::kMaxRanks;
using all_reduce::kThreads;

struct OneShotArgs {
  float* slots[kMaxRanks];       // every rank's receive slots [2][tp][slot_floats]
  uint32_t* flags[kMaxRanks];    // every rank's flags [2][tp][kMaxBlocks]
  CallState* states[kMaxRanks];  // every rank's P2P call counters: this rank's, and its peers' to report a stall
  all_reduce::Stall* stall;      // this rank's record, in mapped host memory
  float* data;
  int64_t n;
  int64_t slot_floats;
  uint64_t spin_limit_ns;
  int rank;
  int tp;
};

struct HostStagedArgs {
  uint64_t* words;  // pinned, mapped host memory shared by all ranks: [2][tp][slot_floats]
  CallState* state;
  all_reduce::Stall* stall;  // this rank's record
  float* data;
  int64_t n;
  int64_t slot_floats;
  uint64_t spin_limit_ns;
  int rank;
  int tp;
};

__device__ __forceinline__ void StoreRelease(uint32_t* p, uint32_t v) {
  asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ uint32_t LoadAcquire(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
// Host-staged words: one 8-byte access each, never cached (NCCL's LL protocol does the same).
__device__ __forceinline__ void StoreWord(uint64_t* p, uint64_t v) {
  asm volatile("st.volatile.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
__device__ __forceinline__ uint64_t LoadWord(const uint64_t* p) {
  uint64_t v;
  asm volatile("ld.volatile.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ uint64_t NowNs() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// A wait past the spin limit: the rank's first waiting block records what it waited for (the host
// reads it once its stream reports the failure: DeviceAllReduce::StallReport), then every waiter traps.
__device__ __noinline__ void StallAndTrap(CallState* state, all_reduce::Stall* record, int sender, uint32_t seq,
                                          uint32_t seen, uint32_t sender_calls, int64_t n, int64_t element) {
  if (atomicCAS(&state->stalled, 0u, 1u) == 0u) {
    volatile all_reduce::Stall* r = record;
    r->block = static_cast<int32_t>(blockIdx.x);
    r->grid = static_cast<int32_t>(gridDim.x);
    r->sender = sender;
    r->seq = seq;
    r->seen = seen;
    r->sender_calls = sender_calls;
    r->n = n;
    r->element = element;
    __threadfence_system();
    r->complete = 1u;
    __threadfence_system();
  }
  __trap();
}

// The call's sequence, read by thread 0 for the block: `calls` changes only at the end of the
// previous call (stream order).
__device__ __forceinline__ uint32_t CallSequence(const CallState* state) {
  __shared__ uint32_t seq_shared;
  if (threadIdx.x == 0) seq_shared = __ldcg(&state->calls) + 1;
  __syncthreads();
  return seq_shared;
}

// End: the last block of the call moves the call count on, for the next call on this stream.
__device__ __forceinline__ void EndCall(CallState* state, uint32_t seq) {
  __syncthreads();
  if (threadIdx.x == 0 && all_reduce::LastToArrive(atomicAdd(&state->arrivals, 1u), gridDim.x)) {
    state->arrivals = 0;
    state->calls = seq;
  }
}

__global__ void __launch_bounds__(kThreads) OneShotKernel(OneShotArgs a) {
  const int b = blockIdx.x;
  const all_reduce::Chunk chunk = all_reduce::OneShotChunk(a.n, gridDim.x, b);
  const uint32_t seq = CallSequence(a.states[a.rank]);
  const int64_t my_slot = all_reduce::SlotOffset(seq, a.tp, a.rank, a.slot_floats);

  // Push my chunk into every receiver's buffer.
  for (int q = 0; q < a.tp; ++q) {
    float* dst = a.slots[q] + my_slot;
    for (int64_t i = chunk.begin + threadIdx.x; i < chunk.end; i += blockDim.x) dst[i] = a.data[i];
  }
  __threadfence_system();
  __syncthreads();
  if (threadIdx.x < a.tp) StoreRelease(a.flags[threadIdx.x] + all_reduce::FlagOffset(seq, a.tp, a.rank, b), seq);

  // Wait for every sender's chunk in my buffer.
  float* mine = a.slots[a.rank];
  if (threadIdx.x < a.tp) {
    const uint32_t* flag = a.flags[a.rank] + all_reduce::FlagOffset(seq, a.tp, threadIdx.x, b);
    const uint64_t start = NowNs();
    uint32_t seen;
    while (!all_reduce::FlagReached(seen = LoadAcquire(flag), seq)) {
      if (NowNs() - start > a.spin_limit_ns) {
        const uint32_t sender_calls = *reinterpret_cast<volatile const uint32_t*>(&a.states[threadIdx.x]->calls);
        StallAndTrap(a.states[a.rank], a.stall, threadIdx.x, seq, seen, sender_calls, a.n, -1);
      }
    }
  }
  __syncthreads();

  // Sum in rank order, reading around L1 (a line could hold the slot's previous contents).
  for (int64_t i = chunk.begin + threadIdx.x; i < chunk.end; i += blockDim.x) {
    float acc = 0;
    for (int s = 0; s < a.tp; ++s) acc += __ldcv(mine + all_reduce::SlotOffset(seq, a.tp, s, a.slot_floats) + i);
    a.data[i] = acc;
  }
  EndCall(a.states[a.rank], seq);
}

// all_reduce_protocol.h's host-staged words. Each thread pushes and sums the same elements, so no
// barrier separates the two; the words of all senders for an element are loaded at once and only
// the ones not yet of this call are polled again.
__global__ void __launch_bounds__(kThreads) HostStagedKernel(HostStagedArgs a) {
  const all_reduce::Chunk chunk = all_reduce::OneShotChunk(a.n, gridDim.x, blockIdx.x);
  const uint32_t seq = CallSequence(a.state);
  uint64_t* mine = a.words + all_reduce::SlotOffset(seq, a.tp, a.rank, a.slot_floats);
  for (int64_t i = chunk.begin + threadIdx.x; i < chunk.end; i += blockDim.x) {
    StoreWord(mine + i, all_reduce::PackWord(__float_as_uint(a.data[i]), seq));
  }
  for (int64_t i = chunk.begin + threadIdx.x; i < chunk.end; i += blockDim.x) {
    uint64_t word[kMaxRanks];
#pragma unroll
    for (int s = 0; s < kMaxRanks; ++s) {
      if (s < a.tp) word[s] = LoadWord(a.words + all_reduce::SlotOffset(seq, a.tp, s, a.slot_floats) + i);
    }
    float acc = 0;
#pragma unroll
    for (int s = 0; s < kMaxRanks; ++s) {
      if (s >= a.tp) break;
      if (!all_reduce::WordReached(word[s], seq)) {
        const uint64_t* p = a.words + all_reduce::SlotOffset(seq, a.tp, s, a.slot_floats) + i;
        const uint64_t start = NowNs();
        do {
          if (NowNs() - start > a.spin_limit_ns) {
            StallAndTrap(a.state, a.stall, s, seq, static_cast<uint32_t>(word[s] >> 32), all_reduce::kNoCount, a.n, i);
          }
          word[s] = LoadWord(p);
        } while (!all_reduce::WordReached(word[s], seq));
      }
      acc += __uint_as_float(all_reduce::WordValueBits(word[s]));
    }
    a.data[i] = acc;
  }
  EndCall(a.state, seq);
}

// PrepareAllReduceStream's launch: what matters is that the stream ran a kernel.
__global__ void StreamReadyKernel() {}

__global__ void WritePatternKernel(uint32_t* dst, int64_t n, uint32_t salt) {
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    dst[i] = static_cast<uint32_t>(i) * 2654435761u ^ salt;
  }
}

// Whether device `from` can really write into device `to`'s memory: enable access, write a
// pattern with a kernel on `from`, read it back from `to`.
Result<bool> TransferTest(int from, int to) {
  int can = 0;
  TEMPER_CUDA_TRY(cudaDeviceCanAccessPeer(&can, from, to));
  if (!can) return false;
  TEMPER_CUDA_TRY(cudaSetDevice(from));
  const cudaError_t enabled = cudaDeviceEnablePeerAccess(to, 0);
  if (enabled != cudaSuccess && enabled != cudaErrorPeerAccessAlreadyEnabled) {
    (void)cudaGetLastError();
    return false;
  }
  (void)cudaGetLastError();
  constexpr int64_t kWords = 1 << 20;
  TEMPER_CUDA_TRY(cudaSetDevice(to));
  uint32_t* buffer = nullptr;
  TEMPER_CUDA_TRY(cudaMalloc(&buffer, kWords * sizeof(uint32_t)));
  TEMPER_CUDA_TRY(cudaMemset(buffer, 0, kWords * sizeof(uint32_t)));
  TEMPER_CUDA_TRY(cudaDeviceSynchronize());
  TEMPER_CUDA_TRY(cudaSetDevice(from));
  const uint32_t salt = 0x9e3779b9u ^ static_cast<uint32_t>(from * 131 + to);
  WritePatternKernel<<<64, kThreads>>>(buffer, kWords, salt);
  const cudaError_t wrote = cudaDeviceSynchronize();
  std::vector<uint32_t> back(kWords);
  TEMPER_CUDA_TRY(cudaSetDevice(to));
  const cudaError_t read = cudaMemcpy(back.data(), buffer, kWords * sizeof(uint32_t), cudaMemcpyDeviceToHost);
  cudaFree(buffer);
  if (wrote != cudaSuccess || read != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  for (int64_t i = 0; i < kWords; ++i) {
    if (back[i] != (static_cast<uint32_t>(i) * 2654435761u ^ salt)) return false;
  }
  return true;
}

}  // namespace

// NCCL, loaded with dlopen so that a build needs no NCCL and a machine without it still runs (the
// GPU machines keep it wherever their CUDA stack put it). These entry points and enum values are
// NCCL's stable C ABI (nccl.h): ncclFloat32 = 7, ncclSum = 0, ncclSuccess = 0.
struct DeviceAllReduce::Nccl {
  using Comm = void*;
  using InitAll = int (*)(Comm*, int, const int*);
  using AllReduce = int (*)(const void*, void*, size_t, int, int, Comm, cudaStream_t);
  using Destroy = int (*)(Comm);
  using ErrorString = const char* (*)(int);
  static constexpr int kFloat32 = 7, kSum = 0;

  void* library = nullptr;
  InitAll init_all = nullptr;
  AllReduce all_reduce = nullptr;
  Destroy destroy = nullptr;
  ErrorString error_string = nullptr;
  std::vector<Comm> comms;

  ~Nccl() {
    for (Comm c : comms) {
      if (c) destroy(c);
    }
    if (library) dlclose(library);
  }

  // NCCL on `devices`, or the reason it is not there.
  static Result<std::unique_ptr<Nccl>> Load(const std::vector<int>& devices) {
    auto n = std::make_unique<Nccl>();
    const char* env = std::getenv("TEMPER_NCCL_LIBRARY");
    const std::string name = env && *env ? env : "libnccl.so.2";
    n->library = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!n->library) return Status::NotFound("NCCL: cannot load " + name + ": " + dlerror());
    n->init_all = reinterpret_cast<InitAll>(dlsym(n->library, "ncclCommInitAll"));
    n->all_reduce = reinterpret_cast<AllReduce>(dlsym(n->library, "ncclAllReduce"));
    n->destroy = reinterpret_cast<Destroy>(dlsym(n->library, "ncclCommDestroy"));
    n->error_string = reinterpret_cast<ErrorString>(dlsym(n->library, "ncclGetErrorString"));
    if (!n->init_all || !n->all_reduce || !n->destroy || !n->error_string) {
      return Status::NotFound("NCCL: " + name +
                              " lacks ncclCommInitAll, ncclAllReduce, ncclCommDestroy or ncclGetErrorString");
    }
    n->comms.assign(devices.size(), nullptr);
    const int r = n->init_all(n->comms.data(), static_cast<int>(devices.size()), devices.data());
    if (r != 0) {
      n->comms.assign(devices.size(), nullptr);
      return Status::Unavailable(std::string("NCCL: ncclCommInitAll failed: ") + n->error_string(r));
    }
    return Result<std::unique_ptr<Nccl>>(std::move(n));  // nvcc's front end does not move implicitly
  }
};

int RequestQueueConnections() {
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", /*overwrite=*/0);
  const int connections = std::atoi(std::getenv("CUDA_DEVICE_MAX_CONNECTIONS"));
  return connections > 0 ? connections : 8;
}

Status PrepareAllReduceStream(cudaStream_t stream) {
  TEMPER_RETURN_IF_ERROR(LoadKernelCode(StreamReadyKernel, "StreamReadyKernel", nullptr));
  StreamReadyKernel<<<1, 1, 0, stream>>>();
  TEMPER_CUDA_TRY(cudaGetLastError());
  TEMPER_CUDA_TRY(cudaStreamSynchronize(stream));
  return Status::OK();
}

DeviceAllReduce::~DeviceAllReduce() {
  nccl_.reset();
  for (const RankBuffers& r : ranks_) {
    if (cudaSetDevice(r.device) != cudaSuccess) continue;
    cudaFree(r.slots);
    cudaFree(r.flags);
    cudaFree(r.calls);
  }
  if (host_words_) cudaFreeHost(host_words_);
  if (stalls_) cudaFreeHost(stalls_);
}

Result<std::unique_ptr<DeviceAllReduce>> DeviceAllReduce::Create(std::span<const int> devices, const Options& options) {
  const int tp = static_cast<int>(devices.size());
  if (tp < 1 || tp > kMaxRanks) {
    return Status::InvalidArgument("all-reduce: " + S(tp) + " ranks (1-" + S(kMaxRanks) + ")");
  }
  if (options.slot_bytes < 4 * 1024) return Status::InvalidArgument("all-reduce: slots must hold at least 4 KiB");
  const int connections = RequestQueueConnections();
  for (int d : devices) {
    const int sharing = static_cast<int>(std::count(devices.begin(), devices.end(), d));
    if (sharing > connections) {
      return Status::InvalidArgument("all-reduce: " + S(sharing) + " ranks share GPU " + S(d) + ", more than its " +
                                     S(connections) +
                                     " hardware queues (CUDA_DEVICE_MAX_CONNECTIONS): a rank could wait behind a "
                                     "peer's spinning all-reduce");
    }
  }
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    return Status::FailedPrecondition(std::string("all-reduce: no CUDA device is usable (") +
                                      (e == cudaSuccess ? "none present" : cudaGetErrorString(e)) + ")");
  }
  for (int d : devices) {
    if (d < 0 || d >= count) return Status::InvalidArgument("all-reduce: GPU " + S(d) + " does not exist");
  }
  std::unique_ptr<DeviceAllReduce> ar(new DeviceAllReduce());
  ar->options_ = options;
  ar->topology_.tp = tp;
  ar->topology_.one_shot_max_bytes = options.one_shot_max_bytes;
  ar->slot_floats_ = options.slot_bytes / sizeof(float);

  // P2P: every ordered pair of distinct devices must pass the transfer test.
  const std::set<int> distinct(devices.begin(), devices.end());
  bool p2p = options.allow_p2p;
  for (int from : distinct) {
    for (int to : distinct) {
      if (!p2p || from == to) continue;
      TEMPER_ASSIGN_OR_RETURN(bool ok, TransferTest(from, to));
      p2p = ok;
    }
  }
  ar->topology_.p2p_ok = p2p;

  const size_t slot_bytes = sizeof(float) * 2 * tp * ar->slot_floats_;
  const size_t flag_bytes = sizeof(uint32_t) * 2 * tp * kMaxBlocks;
  for (int r = 0; r < tp; ++r) {
    RankBuffers b;
    b.device = devices[r];
    TEMPER_CUDA_TRY(cudaSetDevice(b.device));
    if (p2p) {
      TEMPER_CUDA_TRY(cudaMalloc(&b.slots, slot_bytes));
      TEMPER_CUDA_TRY(cudaMalloc(&b.flags, flag_bytes));
      TEMPER_CUDA_TRY(cudaMemset(b.flags, 0, flag_bytes));
    }
    // Loaded now, on every rank's device: a lazy load at the first call could wait for a peer's
    // spinning all-reduce (kernel_loading.h).
    TEMPER_RETURN_IF_ERROR(LoadKernelCode(OneShotKernel, "OneShotKernel", nullptr));
    TEMPER_RETURN_IF_ERROR(LoadKernelCode(HostStagedKernel, "HostStagedKernel", nullptr));
    TEMPER_CUDA_TRY(cudaMalloc(&b.calls, sizeof(CallState) * 2));
    TEMPER_CUDA_TRY(cudaMemset(b.calls, 0, sizeof(CallState) * 2));
    TEMPER_CUDA_TRY(cudaDeviceSynchronize());
    ar->ranks_.push_back(b);
  }
  void* host = nullptr;
  const uint64_t host_bytes = all_reduce::HostStagedBytes(tp, sizeof(float) * ar->slot_floats_);
  TEMPER_CUDA_TRY(cudaHostAlloc(&host, host_bytes, cudaHostAllocMapped | cudaHostAllocPortable));
  ar->host_words_ = static_cast<uint64_t*>(host);
  std::fill(ar->host_words_, ar->host_words_ + host_bytes / sizeof(uint64_t), uint64_t{0});  // seq 0: no call yet
  void* stalls = nullptr;
  TEMPER_CUDA_TRY(cudaHostAlloc(&stalls, sizeof(all_reduce::Stall) * tp, cudaHostAllocMapped | cudaHostAllocPortable));
  ar->stalls_ = static_cast<all_reduce::Stall*>(stalls);
  std::fill(ar->stalls_, ar->stalls_ + tp, all_reduce::Stall{});
  TEMPER_CUDA_TRY(cudaHostGetDevicePointer(reinterpret_cast<void**>(&ar->stalls_device_), stalls, 0));

  if (options.allow_nccl && tp > 1 && static_cast<int>(distinct.size()) == tp) {
    Result<std::unique_ptr<Nccl>> nccl = Nccl::Load(std::vector<int>(devices.begin(), devices.end()));
    if (nccl.ok()) ar->nccl_ = std::move(*nccl);
  }
  ar->topology_.nccl_available = ar->nccl_ != nullptr;
  return Result<std::unique_ptr<DeviceAllReduce>>(std::move(ar));
}

std::string DeviceAllReduce::StallReport() const {
  std::string report;
  for (int rank = 0; stalls_ && rank < topology_.tp; ++rank) {
    const volatile all_reduce::Stall& st = stalls_[rank];
    if (st.complete == 0) continue;
    const bool host_staged = st.element >= 0;
    report += (report.empty() ? "all-reduce stalled: rank " : " / rank ") + S(rank) + ", block " + S(st.block) +
              " of " + S(st.grid) + ", call " + S(st.seq) + " of " + S(st.n) + " floats, waited " +
              S(options_.spin_limit_ms) + " ms for rank " + S(st.sender) + "'s " +
              (host_staged ? "word for element " + S(st.element) : std::string("flag")) + ", which showed call " +
              S(st.seen);
    if (st.sender_calls != all_reduce::kNoCount) {
      report += "; rank " + S(st.sender) + " had ended " + S(st.sender_calls) + " calls";
    }
  }
  return report;
}

Status DeviceAllReduce::AllReduceSum(int rank, float* data, size_t n, cudaStream_t stream) {
  const AllReduceAlgo algo = ChooseAllReduce(topology_, sizeof(float) * n);
  if (algo == AllReduceAlgo::kNone) return Status::OK();
  return AllReduceSumWith(algo, rank, data, n, stream);
}

Status DeviceAllReduce::AllReduceSumWith(AllReduceAlgo algo, int rank, float* data, size_t n, cudaStream_t stream) {
  if (rank < 0 || rank >= topology_.tp) return Status::InvalidArgument("all-reduce: rank " + S(rank) + " out of range");
  if (n == 0) return Status::OK();
  switch (algo) {
    case AllReduceAlgo::kNone:
      if (topology_.tp > 1) return Status::FailedPrecondition("all-reduce: 'none' only serves tp 1");
      return Status::OK();
    case AllReduceAlgo::kOneShotP2p:
      if (!topology_.p2p_ok) {
        return Status::FailedPrecondition(
            "all-reduce: one-shot P2P is not available (peer access absent, refused, or "
            "the transfer test failed)");
      }
      return OneShot(/*host_staged=*/false, rank, data, n, stream);
    case AllReduceAlgo::kHostStaged:
      return OneShot(/*host_staged=*/true, rank, data, n, stream);
    case AllReduceAlgo::kNccl: {
      if (!nccl_) {
        return Status::FailedPrecondition(
            "all-reduce: NCCL is not up (it needs one GPU per rank and libnccl.so.2, "
            "or TEMPER_NCCL_LIBRARY)");
      }
      const int r = nccl_->all_reduce(data, data, n, Nccl::kFloat32, Nccl::kSum, nccl_->comms[rank], stream);
      if (r != 0) return Status::Internal(std::string("NCCL: ncclAllReduce failed: ") + nccl_->error_string(r));
      return Status::OK();
    }
  }
  return Status::InvalidArgument("all-reduce: unknown algorithm");
}

Status DeviceAllReduce::OneShot(bool host_staged, int rank, float* data, size_t n, cudaStream_t stream) {
  CallState* state = ranks_[rank].calls + (host_staged ? 1 : 0);
  const uint64_t spin_limit_ns = uint64_t{options_.spin_limit_ms} * 1'000'000;
  // Messages larger than a slot go in rounds; each round is a whole protocol.
  for (size_t offset = 0; offset < n; offset += slot_floats_) {
    const int64_t round = static_cast<int64_t>(std::min(slot_floats_, n - offset));
    const int grid = all_reduce::OneShotGrid(round);
    if (host_staged) {
      const HostStagedArgs a{.words = host_words_,
                             .state = state,
                             .stall = stalls_device_ + rank,
                             .data = data + offset,
                             .n = round,
                             .slot_floats = static_cast<int64_t>(slot_floats_),
                             .spin_limit_ns = spin_limit_ns,
                             .rank = rank,
                             .tp = topology_.tp};
      HostStagedKernel<<<grid, kThreads, 0, stream>>>(a);
    } else {
      OneShotArgs a{};
      for (int r = 0; r < topology_.tp; ++r) {
        a.slots[r] = ranks_[r].slots;
        a.flags[r] = ranks_[r].flags;
        a.states[r] = ranks_[r].calls;  // the P2P counters come first
      }
      a.stall = stalls_device_ + rank;
      a.data = data + offset;
      a.n = round;
      a.slot_floats = static_cast<int64_t>(slot_floats_);
      a.spin_limit_ns = spin_limit_ns;
      a.rank = rank;
      a.tp = topology_.tp;
      OneShotKernel<<<grid, kThreads, 0, stream>>>(a);
    }
    TEMPER_CUDA_TRY(cudaGetLastError());
  }
  return Status::OK();
}

}  // namespace temper::engine::cuda
