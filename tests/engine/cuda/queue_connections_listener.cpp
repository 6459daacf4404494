// temper_cuda_tests asks for the CUDA backend's 32 hardware queues per GPU (RequestQueueConnections)
// before any case makes its first CUDA call, so that ranks sharing a GPU run here as they run in the
// daemon. The backend asks for them itself before its own first call, but in this binary the first
// call comes earlier, from a case's GPU check (cudaGetDeviceCount initialises the driver), and the
// all-reduce cases create no backend at all.
#define CATCH_CONFIG_EXTERNAL_INTERFACES
#include <catch2/catch.hpp>

#include "engine/cuda/all_reduce.h"

namespace temper::engine::cuda {
namespace {

struct QueueConnections : Catch::TestEventListenerBase {
  using TestEventListenerBase::TestEventListenerBase;
  void testRunStarting(const Catch::TestRunInfo& info) override {
    RequestQueueConnections();
    TestEventListenerBase::testRunStarting(info);
  }
};
CATCH_REGISTER_LISTENER(QueueConnections)

}  // namespace
}  // namespace temper::engine::cuda
