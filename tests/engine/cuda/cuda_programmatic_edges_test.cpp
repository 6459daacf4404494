// Programmatic edges in a captured step (engine/cuda/programmatic_edges.h), on GPU 0 (skipped
// without one): which edges become programmatic (kernel to waiting kernel, on sm_90 and later,
// when asked), and that the replayed step computes exactly what its ops compute launched one by
// one.
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "engine/cuda/cuda_ops.h"
#include "engine/cuda/programmatic_edges.h"
#include "engine/cuda_test_support.h"

namespace temper::engine::cuda {
namespace {

using testing::RandomBf16;
using testing::RandomFloats;

TEST_CASE("a captured step's edges between waiting kernels become programmatic, and it computes the same", "[cuda]") {
  TEMPER_SKIP_WITHOUT_GPU();
  const int rows = 3, n = 512;
  const size_t bytes = sizeof(float) * rows * n;
  const std::vector<float> x = RandomFloats(size_t(rows) * n, 1, 4.0f);
  const std::vector<uint16_t> w = RandomBf16(n, 2);
  Result<bool> supported = ProgrammaticLaunchSupported(0);
  REQUIRE(supported.ok());
  for (bool asked : {true, false}) {
    INFO("programmatic edges asked for: " << asked << "; the GPU runs them: " << *supported);
    auto made = CudaOps::Create(0, 0, nullptr, {.programmatic_edges = asked});
    REQUIRE(made.ok());
    CudaOps& ops = **made;
    std::vector<void*> owned;
    auto alloc = [&](size_t size) {
      Result<void*> p = ops.Alloc(size);
      REQUIRE(p.ok());
      owned.push_back(*p);
      return *p;
    };
    float* dx = static_cast<float*>(alloc(bytes));
    float* dy = static_cast<float*>(alloc(bytes));
    float* dz = static_cast<float*>(alloc(bytes));
    uint16_t* dw = static_cast<uint16_t*>(alloc(sizeof(uint16_t) * n));
    REQUIRE(ops.CopyToDevice(dx, x.data(), bytes).ok());
    REQUIRE(ops.CopyToDevice(dw, w.data(), sizeof(uint16_t) * n).ok());
    // Kernel, kernel, copy, kernel: one kernel-to-kernel edge of three.
    auto step = [&]() -> Status {
      TEMPER_RETURN_IF_ERROR(ops.RmsNorm(dx, dy, dw, rows, n, 1e-6f, 0.0f));
      TEMPER_RETURN_IF_ERROR(ops.Softcap(dy, n, rows, n, 2.0f));
      TEMPER_RETURN_IF_ERROR(ops.CopyOnDevice(dz, dy, bytes));
      return ops.Softcap(dz, n, rows, n, 1.5f);
    };
    std::vector<float> want(size_t(rows) * n), got(size_t(rows) * n);
    REQUIRE(step().ok());
    REQUIRE(ops.CopyToHost(want.data(), dz, bytes).ok());
    REQUIRE(ops.Synchronize().ok());
    const std::vector<float> zeros(size_t(rows) * n, 0.0f);
    REQUIRE(ops.CopyToDevice(dy, zeros.data(), bytes).ok());
    REQUIRE(ops.CopyToDevice(dz, zeros.data(), bytes).ok());

    REQUIRE(ops.Capture(1, step).ok());
    CHECK(ops.captured_edges().edges == (asked && *supported ? 3 : 0));
    CHECK(ops.captured_edges().programmatic == (asked && *supported ? 1 : 0));
    for (int replay = 0; replay < 3; ++replay) REQUIRE(ops.Replay(1).ok());
    REQUIRE(ops.CopyToHost(got.data(), dz, bytes).ok());
    REQUIRE(ops.Synchronize().ok());
    CHECK(got == want);
    for (void* p : owned) ops.Free(p);
  }
}

}  // namespace
}  // namespace temper::engine::cuda
