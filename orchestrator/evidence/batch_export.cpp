#include "orchestrator/evidence/batch_export.h"

#include <cctype>
#include <fstream>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "orchestrator/evidence/checklist_ckl.h"
#include "orchestrator/evidence/checklist_cklb.h"
#include "orchestrator/evidence/checklist_xccdf.h"
#include "orchestrator/evidence/evidence_checklist.h"
#include "orchestrator/evidence/evidence_report.h"
#include "orchestrator/evidence/export_html.h"
#include "orchestrator/evidence/results_redaction.h"

namespace temper::evidence {
namespace {

constexpr ExportFormat kFormats[] = {ExportFormat::kArf, ExportFormat::kCkl, ExportFormat::kCklb, ExportFormat::kXccdf,
                                     ExportFormat::kHtml};

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

// The DISA STIG the batch's checklists carry the ids of, or null for SSG's ids.
Result<const stig::DisaStig*> ChosenDisaStig(const ExportSources& sources, const EvidenceReport& report,
                                             const stig::DisaStig* given) {
  std::set<std::string> stig_ids;
  for (const RuleEvidence& r : report.rules) {
    if (r.info) stig_ids.insert(r.info->stig_ids.begin(), r.info->stig_ids.end());
  }
  if (!given) {
    return sources.disa_stigs ? stig::MatchingDisaStig(*sources.disa_stigs, stig_ids) : nullptr;
  }
  if (given->CountCovered(stig_ids) > 0) return given;
  return Status::InvalidArgument(fmt::format(
      "DISA STIG {} ({}) holds none of the STIG ids of batch {}'s rules{}: is it the STIG of the target's OS?",
      given->benchmark_id, given->source, report.batch.id,
      stig_ids.empty() ? std::string() : " (such as " + *stig_ids.begin() + ")"));
}

}  // namespace

Result<ExportFormat> ParseExportFormat(std::string_view name) {
  for (ExportFormat f : kFormats) {
    if (ExportFormatName(f) == name) return f;
  }
  return Status::InvalidArgument(fmt::format("format: \"{}\" is not one of arf, ckl, cklb, xccdf, html", name));
}

std::string_view ExportFormatName(ExportFormat format) {
  switch (format) {
    case ExportFormat::kArf:
      return "arf";
    case ExportFormat::kCkl:
      return "ckl";
    case ExportFormat::kCklb:
      return "cklb";
    case ExportFormat::kXccdf:
      return "xccdf";
    case ExportFormat::kHtml:
      return "html";
  }
  return "html";
}

Result<ExportedFile> ExportBatch(const ExportSources& sources, int64_t batch_id, ExportFormat format,
                                 const stig::DisaStig* disa) {
  TEMPER_ASSIGN_OR_RETURN(BatchRecord batch, sources.store.GetBatch(batch_id));
  ExportedFile out;
  std::string stem = fmt::format("temper-batch-{}-{}", batch.id, FileSafe(batch.target));
  if (format == ExportFormat::kArf) {
    std::string arf = BatchResultsDir(sources.results_root, batch.id, "after") + "/arf.xml";
    if (batch.state != BatchState::kCompleted) {
      return Status::FailedPrecondition(fmt::format("batch {} is {}: its final ARF is written when it completes",
                                                    batch.id, BatchStateName(batch.state)));
    }
    TEMPER_ASSIGN_OR_RETURN(std::string whole, ReadWhole(arf));
    out.content = RedactPasswordElements(whole);  // no account's hash leaves (results_redaction.h)
    out.file_name = stem + "-arf.xml";
    out.media_type = "application/xml";
    return out;
  }
  TEMPER_ASSIGN_OR_RETURN(const stig::Content* content, sources.content(batch));
  TEMPER_ASSIGN_OR_RETURN(EvidenceReport report,
                          CollectEvidence(sources.store, *content, sources.results_root, batch.id));
  TEMPER_ASSIGN_OR_RETURN(const stig::DisaStig* chosen, ChosenDisaStig(sources, report, disa));
  switch (format) {
    case ExportFormat::kCkl:
      out.content = WriteCkl(EvidenceChecklist(report, chosen));
      out.file_name = stem + ".ckl";
      out.media_type = "application/xml";
      break;
    case ExportFormat::kCklb:
      out.content = WriteCklb(EvidenceChecklist(report, chosen));
      out.file_name = stem + ".cklb";
      out.media_type = "application/json";
      break;
    case ExportFormat::kXccdf: {
      if (!chosen) {
        return Status::FailedPrecondition(fmt::format(
            "the XCCDF export carries DISA's rule ids, and no DISA STIG covers batch {}'s rules: give one with "
            "temper export --disa-stig FILE, or put DISA's STIG XCCDF in the directory disa_stigs: names in "
            "temperd.yaml",
            batch.id));
      }
      XccdfResultsRun run{fmt::format("batch-{}", batch.id),
                          fmt::format("temper batch {}{}", batch.id, batch.name.empty() ? "" : " (" + batch.name + ")"),
                          batch.created_at, batch.updated_at};
      out.content = WriteXccdfResults(EvidenceChecklist(report, chosen), run);
      out.file_name = stem + "-xccdf.xml";
      out.media_type = "application/xml";
      break;
    }
    default:
      out.content = ExportHtml(report);
      out.file_name = stem + ".html";
      out.media_type = "text/html";
  }
  return out;
}

}  // namespace temper::evidence
