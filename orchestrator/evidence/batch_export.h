// BatchExport: one batch's evidence as a file in the format an assessor's tool reads — ARF for
// SCAP tools, CKL for STIG Viewer 2, CKLB for STIG Viewer 3, XCCDF results with DISA's ids for
// STIG Manager's import, HTML for people — made on the daemon, which holds the state store,
// OpenSCAP's results files and the content, so a CLI on another machine gets the same file.
//
// For fleet tools, the batch's kept fixes as an Ansible playbook or a sh script (fix_playbook.h):
// every kept attempt not since reverted, in the order the batch committed them, from the bundle
// stored with it (AttemptRecord::fix_json). Kept fixes without one (found on an SSH host, or over a
// bundle's limits) are left out and named, at the top of the file and in ExportedFile::not_carried.
//
// Checklists carry DISA's ids when a DISA STIG is at hand: the one the client sent, else the one
// of temperd's disa_stigs: directory that covers most of the batch's STIG ids.
// Thread safety: ExportBatch may run concurrently (it reads the store and files).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "orchestrator/store/state_store.h"
#include "stig/scap/content.h"
#include "stig/scap/disa_stig.h"

namespace temper::evidence {

enum class ExportFormat { kArf, kCkl, kCklb, kXccdf, kHtml, kAnsible, kSh };

// "arf", "ckl", "cklb", "xccdf", "html", "ansible", "sh"; InvalidArgument listing them otherwise.
Result<ExportFormat> ParseExportFormat(std::string_view name);
std::string_view ExportFormatName(ExportFormat format);
// Ansible and sh: the kept fixes whole, the target's file bytes with them (not only evidence).
inline bool CarriesFileContents(ExportFormat format) {
  return format == ExportFormat::kAnsible || format == ExportFormat::kSh;
}

struct ExportedFile {
  std::string content;
  std::string file_name;   // suggested: temper-batch-<id>-<target>.<ext>; batch-<id>.yml or .sh for fixes
  std::string media_type;  // application/xml, application/json, text/html, application/yaml, text/x-shellscript
  // Ansible and sh: the rules whose kept fixes have no bundle to carry (also listed in the file).
  std::vector<std::string> not_carried;
};

struct ExportSources {
  StateStore& store;
  // The content a batch's datastream and profile load to (the daemon shares its loaded copies).
  std::function<Result<const stig::Content*>(const BatchRecord&)> content;
  std::string results_root;  // as the loop was given it (LoopServices::results_root)
  // temperd's disa_stigs: directory, read at start; null or empty when none is configured.
  const std::vector<stig::DisaStig>* disa_stigs = nullptr;
};

// The batch's evidence in `format`. ARF is OpenSCAP's file of the batch's final evaluation, as
// written; FailedPrecondition when the batch has not finished it yet. `disa` (the client's DISA
// STIG, or null) decides the checklists' ids as above; InvalidArgument when it holds none of the
// batch's STIG ids (the STIG of another OS). XCCDF needs a DISA STIG: FailedPrecondition saying
// how to give one otherwise. Errors of CollectEvidence and of loading the content otherwise.
// Ansible and sh: DataLoss naming the attempt when a stored bundle does not parse, and the
// refusals of WriteFixPlaybook and WriteFixScript (what the format cannot carry, named).
Result<ExportedFile> ExportBatch(const ExportSources& sources, int64_t batch_id, ExportFormat format,
                                 const stig::DisaStig* disa = nullptr);

}  // namespace temper::evidence
