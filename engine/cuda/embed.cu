// Embedding rows, vocab-parallel (point 1): the rank owning a token's row writes it scaled by
// bf16(sqrt(hidden)), the others write zeros, and the all-reduce that follows assembles the rows.
#include <cuda_runtime.h>

#include "engine/cuda/cuda_status.h"
#include "engine/cuda/grid_dependency.h"
#include "engine/cuda/kernel_loading.h"
#include "engine/cuda/kernel_math.h"
#include "engine/cuda/kernels.h"

namespace temper::engine::cuda {
namespace {

using detail::S;

__global__ void EmbedKernel(const int32_t* tokens, const uint16_t* table, int vocab_begin, int vocab_end, int hidden,
                            float scale, float* x) {
  AwaitPriorGrid();
  const int r = blockIdx.x;
  const int32_t token = tokens[r];
  float* xr = x + int64_t{r} * hidden;
  const bool mine = token >= vocab_begin && token < vocab_end;
  const uint16_t* e = table + int64_t{mine ? token - vocab_begin : 0} * hidden;
  for (int i = threadIdx.x; i < hidden; i += blockDim.x) xr[i] = mine ? math::Bf16ToFloat(e[i]) * scale : 0.0f;
}

}  // namespace

Status LaunchEmbed(const int32_t* tokens, int rows, const uint16_t* table, int vocab_begin, int vocab_end, int hidden,
                   float scale, float* x, cudaStream_t stream) {
  if (rows < 1 || hidden < 1 || vocab_end < vocab_begin) {
    return Status::InvalidArgument("embed: rows " + S(rows) + ", hidden " + S(hidden) + ", vocabulary [" +
                                   S(vocab_begin) + ", " + S(vocab_end) + ")");
  }
  EmbedKernel<<<rows, 256, 0, stream>>>(tokens, table, vocab_begin, vocab_end, hidden, scale, x);
  TEMPER_CUDA_TRY(cudaGetLastError());
  return Status::OK();
}

Status LoadEmbedKernels(AwaitingKernels* awaiting) {
  TEMPER_RETURN_IF_ERROR(LoadKernelCode(EmbedKernel, "EmbedKernel", awaiting));
  return Status::OK();
}

}  // namespace temper::engine::cuda
