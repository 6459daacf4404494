// Checklist: a DISA STIG Viewer checklist as data — the target, the STIGs, and per requirement
// (VULN) its attributes, status, finding details and comments — apart from its two file formats,
// CKL (STIG Viewer 2, XML; checklist_ckl.h) and CKLB (STIG Viewer 3, JSON; checklist_cklb.h).
//
// Assessors load checklists into STIG Viewer, STIG Manager, eMASS or OpenRMF; temper writes its
// evidence as one, and reads checklists back so round trips are tested against real files.
// Attributes keep their order and may repeat (a VULN has one CCI_REF per CCI), as in CKL.
// Thread safety: plain values.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"

namespace temper::evidence {

// STIG Viewer's four statuses.
enum class ChecklistStatus { kNotAFinding, kOpen, kNotApplicable, kNotReviewed };

std::string_view CklStatusName(ChecklistStatus s);   // "NotAFinding", "Open", "Not_Applicable", "Not_Reviewed"
std::string_view CklbStatusName(ChecklistStatus s);  // "not_a_finding", "open", "not_applicable", "not_reviewed"
// InvalidArgument naming the token.
Result<ChecklistStatus> ParseCklStatus(std::string_view token);
Result<ChecklistStatus> ParseCklbStatus(std::string_view token);

// name -> value, in order; a name may repeat.
using ChecklistAttributes = std::vector<std::pair<std::string, std::string>>;

// A UUID (RFC 9562 version 8) derived from `seed`: checklists need ids for their STIGs and rules,
// and deriving them from the content keeps two exports of the same batch byte-identical.
std::string DerivedUuid(std::string_view seed);

// The first value of `name`, empty when absent.
std::string AttributeOf(const ChecklistAttributes& attributes, std::string_view name);
// Every value of `name`, in order.
std::vector<std::string> AttributesOf(const ChecklistAttributes& attributes, std::string_view name);

struct ChecklistVuln {
  ChecklistAttributes data;  // STIG_DATA: Vuln_Num, Severity, Rule_ID, Rule_Ver, ..., CCI_REF
  ChecklistStatus status = ChecklistStatus::kNotReviewed;
  std::string finding_details;
  std::string comments;
  std::string severity_override;  // "", "low", "medium", "high"
  std::string severity_justification;

  bool operator==(const ChecklistVuln&) const = default;
};

struct ChecklistStig {
  ChecklistAttributes info;  // STIG_INFO: version, classification, stigid, title, uuid, ...
  std::vector<ChecklistVuln> vulns;

  bool operator==(const ChecklistStig&) const = default;
};

// The Target Data panel.
struct ChecklistAsset {
  std::string role = "None";  // None, Workstation, Member Server, Domain Controller
  std::string asset_type = "Computing";
  std::string marking;
  std::string host_name;
  std::string host_ip;
  std::string host_mac;
  std::string host_fqdn;
  std::string target_comment;
  std::string tech_area;
  std::string target_key;
  bool web_or_database = false;
  std::string web_db_site;
  std::string web_db_instance;

  bool operator==(const ChecklistAsset&) const = default;
};

struct Checklist {
  ChecklistAsset asset;
  std::vector<ChecklistStig> stigs;

  bool operator==(const Checklist&) const = default;
};

}  // namespace temper::evidence
