#include "orchestrator/evidence/batch_export.h"

#include <cctype>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "orchestrator/evidence/checklist_ckl.h"
#include "orchestrator/evidence/checklist_cklb.h"
#include "orchestrator/evidence/evidence_checklist.h"
#include "orchestrator/evidence/evidence_report.h"
#include "orchestrator/evidence/export_html.h"

namespace temper::evidence {
namespace {

constexpr ExportFormat kFormats[] = {ExportFormat::kArf, ExportFormat::kCkl, ExportFormat::kCklb, ExportFormat::kHtml};

// A target name made safe for a file name.
std::string FileSafe(const std::string& s) {
  std::string out;
  for (char c : s) out += (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.') ? c : '_';
  return out;
}

Result<std::string> ReadWhole(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound("cannot read " + path);
  std::ostringstream s;
  s << in.rdbuf();
  if (in.bad()) return Status::IOError("reading " + path);
  return s.str();
}

}  // namespace

Result<ExportFormat> ParseExportFormat(std::string_view name) {
  for (ExportFormat f : kFormats) {
    if (ExportFormatName(f) == name) return f;
  }
  return Status::InvalidArgument(fmt::format("format: \"{}\" is not one of arf, ckl, cklb, html", name));
}

std::string_view ExportFormatName(ExportFormat format) {
  switch (format) {
    case ExportFormat::kArf:
      return "arf";
    case ExportFormat::kCkl:
      return "ckl";
    case ExportFormat::kCklb:
      return "cklb";
    case ExportFormat::kHtml:
      return "html";
  }
  return "html";
}

Result<ExportedFile> ExportBatch(const ExportSources& sources, int64_t batch_id, ExportFormat format) {
  TEMPER_ASSIGN_OR_RETURN(BatchRecord batch, sources.store.GetBatch(batch_id));
  ExportedFile out;
  std::string stem = fmt::format("temper-batch-{}-{}", batch.id, FileSafe(batch.target));
  if (format == ExportFormat::kArf) {
    std::string arf = BatchResultsDir(sources.results_root, batch.id, "after") + "/arf.xml";
    if (batch.state != BatchState::kCompleted) {
      return Status::FailedPrecondition(fmt::format("batch {} is {}: its final ARF is written when it completes",
                                                    batch.id, BatchStateName(batch.state)));
    }
    TEMPER_ASSIGN_OR_RETURN(out.content, ReadWhole(arf));
    out.file_name = stem + "-arf.xml";
    out.media_type = "application/xml";
    return out;
  }
  TEMPER_ASSIGN_OR_RETURN(const stig::Content* content, sources.content(batch));
  TEMPER_ASSIGN_OR_RETURN(EvidenceReport report,
                          CollectEvidence(sources.store, *content, sources.results_root, batch.id));
  switch (format) {
    case ExportFormat::kCkl:
      out.content = WriteCkl(EvidenceChecklist(report));
      out.file_name = stem + ".ckl";
      out.media_type = "application/xml";
      break;
    case ExportFormat::kCklb:
      out.content = WriteCklb(EvidenceChecklist(report));
      out.file_name = stem + ".cklb";
      out.media_type = "application/json";
      break;
    default:
      out.content = ExportHtml(report);
      out.file_name = stem + ".html";
      out.media_type = "text/html";
  }
  return out;
}

}  // namespace temper::evidence
