// `temper report`'s three renderings of a BatchReport: text for a terminal, Markdown for a ticket or
// a pull request, and one JSON object for scripts. All three show the same facts, computed once by
// SummarizeReport: per rule its verdict before and after, final state, attempts, tokens, the commands
// of the attempt that fixed it, the lessons learnt, and why it was escalated or skipped; and for the
// batch the counts per state, the fix rate, the tokens and the wall time.
//
// Pure functions of the message: no daemon, no I/O, so they are tested on hand-built reports.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "temper/v1/temper.pb.h"

namespace temper::cli {

// One rule of the report with its attempts and lessons gathered from the report's flat lists.
// Pointers point into the BatchReport, which must outlive this.
struct RuleReport {
  const temper::v1::BatchRule* rule = nullptr;
  std::vector<const temper::v1::Attempt*> attempts;  // oldest first
  std::vector<const temper::v1::Lesson*> lessons;    // oldest first
  const temper::v1::Attempt* fixed_by = nullptr;     // the attempt whose outcome is "kept"
};

struct ReportSummary {
  temper::v1::RuleCounts counts;   // counted from the rules, so always consistent with them
  uint32_t failed_before = 0;      // rules whose verdict before the batch was "fail"
  uint32_t fixed = 0;              // of those, the rules now fixed
  std::optional<double> fix_rate;  // fixed / failed_before; nullopt when no rule failed before
  uint64_t tokens = 0;             // all roles, all rules
  uint32_t attempts = 0;
  int64_t wall_seconds = 0;       // batch created_at → updated_at
  bool has_run = false;           // false while queued: nothing evaluated or tried yet
  bool evaluated = false;         // some rule has a verdict from before the batch changed anything
  std::vector<RuleReport> rules;  // in the batch's order
};

ReportSummary SummarizeReport(const temper::v1::BatchReport& report);

std::string RenderReportText(const temper::v1::BatchReport& report);
std::string RenderReportMarkdown(const temper::v1::BatchReport& report);
// One JSON object and a newline; the field names are listed in kReportJsonFields and never renamed.
std::string RenderReportJson(const temper::v1::BatchReport& report);

// The JSON output's fields, for `temper report --help`.
extern const char* const kReportJsonFields;

}  // namespace temper::cli
