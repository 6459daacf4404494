// GemmShapeOf (rank_ops.h): the key GemmBf16 plans a kernel by, and ReferenceOps records.
#include <cstdint>

#include "engine/cuda/rank_ops.h"

namespace temper::engine::cuda {
namespace {

int Alignment(const void* p) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  int align = 16;
  while (align > 1 && a % align != 0) align /= 2;
  return align;
}

}  // namespace

GemmShape GemmShapeOf(const void* x, int64_t ldx, const void* w, int64_t ldw, const void* y, int64_t ldy, int rows,
                      int in, int out) {
  return GemmShape{rows, in, out, ldx, ldw, ldy, Alignment(x), Alignment(w), Alignment(y)};
}

}  // namespace temper::engine::cuda
