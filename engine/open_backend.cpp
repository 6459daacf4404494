#include "engine/open_backend.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "engine/cpu/cpu_backend.h"
#include "engine/cuda/cuda_backend.h"

namespace temper::engine {

namespace {

Result<std::unique_ptr<Backend>> OpenCpuBackend(const BackendSpec& spec, const LoadedModel& model) {
  CpuBackendOptions options;
  options.tp = spec.tp;
  options.threads = spec.threads;
  options.max_context = spec.max_context;
  options.kv = spec.kv;
  if (spec.use_drafter) options.drafter = model.drafter;
  TEMPER_ASSIGN_OR_RETURN(std::unique_ptr<CpuBackend> backend,
                          CpuBackend::Create(model.config, model.weights, options));
  return std::unique_ptr<Backend>(std::move(backend));
}

Result<std::unique_ptr<Backend>> OpenCudaBackend(const BackendSpec& spec, const LoadedModel& model) {
  if (spec.tp != 1 && spec.tp != static_cast<int>(spec.devices.size())) {
    return Status::InvalidArgument(
        fmt::format("tp {} but {} GPUs listed; give one GPU per rank", spec.tp, spec.devices.size()));
  }
  cuda::CudaBackendOptions options;
  options.devices = spec.devices;
  options.kv_memory_fraction = spec.kv_memory_fraction;
  options.backend.max_context = spec.max_context;
  options.backend.kv = spec.kv;  // max_tokens: the memory plan decides
  if (spec.device_max_snapshots > 0) {
    options.backend.kv.max_snapshots = std::min(spec.kv.max_snapshots, spec.device_max_snapshots);
  }
  options.backend.max_rows = spec.max_rows;
  options.backend.max_batch = spec.max_batch > 0 ? spec.max_batch : std::min(spec.kv.max_sequences, spec.max_rows);
  if (spec.use_drafter) options.backend.drafter = model.drafter;
  TEMPER_ASSIGN_OR_RETURN(std::unique_ptr<cuda::DeviceBackend> backend,
                          cuda::CreateCudaBackend(model.config, model.weights, options));
  return std::unique_ptr<Backend>(std::move(backend));
}

}  // namespace

std::string BackendDescription(const BackendSpec& spec) {
  if (spec.devices.empty()) return fmt::format("the CPU backend (tp {})", spec.tp);
  return fmt::format("the CUDA backend (gpus [{}])", fmt::join(spec.devices, ", "));
}

Result<std::unique_ptr<Backend>> OpenBackend(const BackendSpec& spec, const LoadedModel& model) {
  Result<std::unique_ptr<Backend>> backend =
      spec.devices.empty() ? OpenCpuBackend(spec, model) : OpenCudaBackend(spec, model);
  if (backend.ok()) return backend;
  const std::string what = BackendDescription(spec);
  return backend.status().WithContext(spec.model_name.empty()
                                          ? fmt::format("opening {}", what)
                                          : fmt::format("opening model {} on {}", spec.model_name, what));
}

}  // namespace temper::engine
