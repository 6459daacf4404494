// The Worker's tools by the names the model calls them (and the journal records them under): one
// list, which the Worker's tool table (worker.cpp) and the journal's sentences about tool calls
// (orchestrator/journal_event_types.cpp) both read. Header-only, so readers of the journal need
// nothing else of roles/.
//
// Thread safety: constants.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

namespace temper {

enum class WorkerTool {
  kRunCommand,
  kReadFile,
  kWriteFile,
  kInstallPackage,
  kRemovePackage,
  kApplyReferenceFix,
  kFinish
};

inline constexpr std::string_view kWorkerToolNames[] = {
    "run_command", "read_file", "write_file", "install_package", "remove_package", "apply_reference_fix", "finish"};
inline constexpr size_t kWorkerToolCount = std::size(kWorkerToolNames);

constexpr std::string_view WorkerToolName(WorkerTool tool) { return kWorkerToolNames[static_cast<size_t>(tool)]; }

// nullopt for a name that is none of the tools.
constexpr std::optional<WorkerTool> ParseWorkerTool(std::string_view name) {
  for (size_t i = 0; i < kWorkerToolCount; ++i) {
    if (kWorkerToolNames[i] == name) return static_cast<WorkerTool>(i);
  }
  return std::nullopt;
}

}  // namespace temper
