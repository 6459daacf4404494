// OvalEvidence: per rule, what OpenSCAP looked at and found — read from the ARF file of an
// evaluation — so a verdict can be shown with the facts that decided it.
//
// An assessor does not accept "pass" on its own: they ask which file, which line, which mode or
// package version the scanner saw. OpenSCAP's ARF (asset-report-collection) holds all of it: the
// XCCDF TestResult (each rule's result and the OVAL definition it checked), and for each OVAL
// report the definitions with their criteria results, the tests with their results, the objects
// collected (with "does not exist" when nothing matched) and the items (the collected
// system data: a textfilecontent54 item's path and matched text, a file item's mode and owner, a
// dpkginfo item's version). ReadOvalEvidence gathers these per rule into a compact structure,
// keeping what decided the result: at most kMaxItemsPerTest items per test (those that failed the
// test first) and field values cut at kMaxFieldBytes.
//
// The ARF file is untrusted input (it may come from a remote host): it is parsed by libxml2 with
// network access, entity substitution and DTD loading off; a malformed file is DataLoss naming it.
// Thread safety: pure functions of their input.
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"

namespace temper::stig {

inline constexpr std::size_t kMaxItemsPerTest = 20;
inline constexpr std::size_t kMaxFieldBytes = 4096;

// name -> text, in document order ("filepath" -> "/etc/issue.net", "pattern" -> "^(.*)$").
using OvalFields = std::vector<std::pair<std::string, std::string>>;

// One collected item: the system data a test examined.
struct OvalItem {
  std::string id;
  std::string type;    // the element name: "textfilecontent_item", "file_item", "dpkginfo_item", ...
  std::string status;  // "exists", "does not exist", "error", "not collected"
  std::string result;  // the item's result in the test: "true", "false", "not evaluated", ...
  OvalFields fields;

  bool operator==(const OvalItem&) const = default;
};

struct OvalTest {
  std::string id;
  std::string type;             // "textfilecontent54_test", "file_test", "dpkginfo_test", ...
  std::string comment;          // from the definitions
  std::string check_existence;  // "all_exist", "none_exist", ... (empty when unset)
  std::string check;            // "all", "at least one", ...
  std::string result;           // "true", "false", "error", "unknown", "not applicable", "not evaluated"
  bool negated = false;         // the criterion negates it
  std::string object_id;
  OvalFields object;            // what the test looks for (filepath, pattern, name, ...)
  std::string object_flag;      // "complete", "does not exist", "error", ... (empty: not collected)
  OvalFields state;             // what matching items must satisfy ("uexec" -> "false"); empty without a state
  OvalFields variables;         // tested_variable id -> value
  std::vector<OvalItem> items;  // at most kMaxItemsPerTest
  std::size_t items_total = 0;  // before the cap

  bool operator==(const OvalTest&) const = default;
};

struct OvalDefinition {
  std::string id;
  std::string title;
  std::string result;                // "true", "false", ...
  std::vector<std::string> extends;  // definitions this one's criteria extend (they follow in the list)
  std::vector<OvalTest> tests;       // in criteria order

  bool operator==(const OvalDefinition&) const = default;
};

struct RuleEvidence {
  std::string rule_id;
  std::string result;   // the XCCDF rule-result
  std::string message;  // OpenSCAP's <message>s, joined; usually empty
  // The checked definition first, then every definition it extends (transitively), each once.
  // Empty for rules without an OVAL check (OCIL/manual) or not evaluated.
  std::vector<OvalDefinition> definitions;

  bool operator==(const RuleEvidence&) const = default;

  // Indented lines for people (CKL FINDING_DETAILS, reports): each definition, test, object and
  // item with its result. Empty when there are no definitions.
  std::string Text() const;
};

// Evidence for `rule_ids` (full XCCDF ids; empty: every rule with a result other than
// "notselected"), in the order of the TestResult. Rules asked for that have no rule-result are
// left out. Errors: NotFound when the file is missing; DataLoss when it is not an ARF document
// with an XCCDF TestResult, or a check refers to an OVAL report the file lacks.
Result<std::vector<RuleEvidence>> ReadOvalEvidence(const std::string& arf_path,
                                                   const std::vector<std::string>& rule_ids = {});

}  // namespace temper::stig
