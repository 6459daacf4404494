// BatchExport: one batch's evidence as a file in the format an assessor's tool reads — ARF for
// SCAP tools, CKL for STIG Viewer 2, CKLB for STIG Viewer 3, HTML for people — made on the daemon,
// which holds the state store, OpenSCAP's results files and the content, so a CLI on another
// machine gets the same file.
// Thread safety: ExportBatch may run concurrently (it reads the store and files).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "common/status.h"
#include "orchestrator/store/state_store.h"
#include "stig/scap/content.h"

namespace temper::evidence {

enum class ExportFormat { kArf, kCkl, kCklb, kHtml };

// "arf", "ckl", "cklb", "html"; InvalidArgument listing them otherwise.
Result<ExportFormat> ParseExportFormat(std::string_view name);
std::string_view ExportFormatName(ExportFormat format);

struct ExportedFile {
  std::string content;
  std::string file_name;   // suggested: temper-batch-<id>-<target>.<ext>
  std::string media_type;  // application/xml, application/json, text/html
};

struct ExportSources {
  StateStore& store;
  // The content a batch's datastream and profile load to (the daemon shares its loaded copies).
  std::function<Result<const stig::Content*>(const BatchRecord&)> content;
  std::string results_root;  // as the loop was given it (LoopServices::results_root)
};

// The batch's evidence in `format`. ARF is OpenSCAP's file of the batch's final evaluation, as
// written; FailedPrecondition when the batch has not finished it yet. Errors of CollectEvidence
// and of loading the content otherwise.
Result<ExportedFile> ExportBatch(const ExportSources& sources, int64_t batch_id, ExportFormat format);

}  // namespace temper::evidence
