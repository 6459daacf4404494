#include "orchestrator/evidence/batch_export.h"

#include <algorithm>
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
#include "orchestrator/evidence/fix_playbook.h"
#include "orchestrator/evidence/results_redaction.h"

namespace temper::evidence {
namespace {

constexpr ExportFormat kFormats[] = {ExportFormat::kArf,   ExportFormat::kCkl,  ExportFormat::kCklb,
                                     ExportFormat::kXccdf, ExportFormat::kHtml, ExportFormat::kAnsible,
                                     ExportFormat::kSh};

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

// The batch's kept fixes, in the order the batch committed them: a kept attempt's snapshot is the
// one its change landed in, and snapshots are numbered as they are taken (attempts at once commit in
// another order than they started); the attempt's id breaks ties and orders attempts without one.
Result<FixExport> KeptFixes(const ExportSources& sources, const BatchRecord& batch) {
  TEMPER_ASSIGN_OR_RETURN(std::vector<AttemptRecord> attempts, sources.store.BatchAttempts(batch.id));
  std::erase_if(attempts, [](const AttemptRecord& a) { return a.outcome != AttemptOutcome::kKept || a.reverted_at; });
  std::stable_sort(attempts.begin(), attempts.end(), [](const AttemptRecord& a, const AttemptRecord& b) {
    uint64_t sa = a.snapshot.value_or(UINT32_MAX), sb = b.snapshot.value_or(UINT32_MAX);
    return sa != sb ? sa < sb : a.id < b.id;
  });
  // Titles are for people reading the file: a batch whose content no longer loads still exports.
  Result<const stig::Content*> content = sources.content(batch);
  FixExport out;
  out.batch_id = batch.id;
  out.target = batch.target;
  for (const AttemptRecord& a : attempts) {
    if (a.fix_json.empty()) {
      out.without_bundle.push_back(a.rule_id);
      continue;
    }
    Result<stig::FixBundle> bundle = stig::FixBundle::FromJson(a.fix_json);
    if (!bundle.ok()) {
      return Status::DataLoss(fmt::format("batch {}: the stored fix of attempt {} ({}) does not read: {}", batch.id,
                                          a.id, a.rule_id, bundle.status().message()));
    }
    std::string title;
    if (content.ok()) {
      if (Result<const stig::RuleInfo*> info = (*content)->Rule(a.rule_id); info.ok()) title = (*info)->title;
    }
    out.fixes.push_back(KeptFix{a.rule_id, std::move(title), std::move(*bundle)});
  }
  return out;
}

}  // namespace

Result<ExportFormat> ParseExportFormat(std::string_view name) {
  for (ExportFormat f : kFormats) {
    if (ExportFormatName(f) == name) return f;
  }
  return Status::InvalidArgument(
      fmt::format("format: \"{}\" is not one of arf, ckl, cklb, xccdf, html, ansible, sh", name));
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
    case ExportFormat::kAnsible:
      return "ansible";
    case ExportFormat::kSh:
      return "sh";
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
  if (format == ExportFormat::kAnsible || format == ExportFormat::kSh) {
    TEMPER_ASSIGN_OR_RETURN(FixExport fixes, KeptFixes(sources, batch));
    if (format == ExportFormat::kAnsible) {
      TEMPER_ASSIGN_OR_RETURN(out.content, WriteFixPlaybook(fixes));
      out.file_name = fmt::format("batch-{}.yml", batch.id);
      out.media_type = "application/yaml";
    } else {
      TEMPER_ASSIGN_OR_RETURN(out.content, WriteFixScript(fixes));
      out.file_name = fmt::format("batch-{}.sh", batch.id);
      out.media_type = "text/x-shellscript";
    }
    out.not_carried = std::move(fixes.without_bundle);
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
