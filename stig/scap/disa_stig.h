// DisaStig: a DISA STIG as DISA publishes it (the "manual" XCCDF 1.1 file, or the XCCDF 1.2
// benchmark inside a SCAP datastream): the ids assessors' tools key on, which SCAP Security
// Guide's content does not carry.
//
// SSG's rules name the STIG id of the requirement they implement ("UBTU-20-010013", the XCCDF
// Rule's <version> in DISA's file); DISA's file maps that id to the vulnerability id (V-238213,
// the Group), the rule id (SV-238213r653796_rule), the group title and the requirement's own
// texts. STIG Viewer, STIG Manager and eMASS merge checklists on those ids, so a checklist made
// with SSG's ids cannot join the site's existing one.
//
// The file may come from a client (`temper export --disa-stig FILE`): it is parsed without network
// access, DTDs or entity expansion, and every problem names the source and the element.
// Thread safety: plain values; the functions are pure.
#pragma once

#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace temper::stig {

// The XCCDF 1.2 form of DISA's ids carries these prefixes (the manual XCCDF 1.1 form does not);
// DisaStig holds ids without them, and the XCCDF results export puts them back.
inline constexpr std::string_view kDisaBenchmarkPrefix = "xccdf_mil.disa.stig_benchmark_";
inline constexpr std::string_view kDisaGroupPrefix = "xccdf_mil.disa.stig_group_";
inline constexpr std::string_view kDisaRulePrefix = "xccdf_mil.disa.stig_rule_";

// One requirement (a Group with its one Rule), with DISA's prefixes of the XCCDF 1.2 form removed.
struct DisaStigRule {
  std::string vuln_id;      // "V-238213"
  std::string group_title;  // "SRG-OS-000163-GPOS-00072"
  std::string rule_id;      // "SV-238213r653796_rule"
  std::string stig_id;      // "UBTU-20-010013"
  std::string severity;     // "low", "medium", "high"
  std::string weight;       // "10.0"
  std::string title;
  // The fields DISA packs as escaped markup inside the Rule's <description>.
  std::string discussion;
  std::string false_positives;
  std::string false_negatives;
  std::string documentable;
  std::string mitigations;
  std::string severity_override_guidance;
  std::string potential_impacts;
  std::string third_party_tools;
  std::string mitigation_control;
  std::string responsibility;
  std::string ia_controls;
  std::string check_content;      // empty in a benchmark, whose checks are OVAL
  std::string check_content_ref;  // "M" for a manual check, the OVAL name in a benchmark
  std::string fix_text;
  std::vector<std::string> legacy_ids;  // older V- and SV- ids, when DISA lists them
  std::vector<std::string> ccis;
};

struct DisaStig {
  std::string source;        // the file name it was read from, or what the client called it
  std::string benchmark_id;  // "Canonical_Ubuntu_20-04_LTS_STIG"
  std::string title;
  std::string description;
  std::string version;              // "1"
  std::string release_info;         // "Release: 12 Benchmark Date: 24 Apr 2024"
  std::vector<DisaStigRule> rules;  // in the file's order

  // The requirement whose STIG id is `stig_id`, or null.
  const DisaStigRule* FindByStigId(std::string_view stig_id) const;
  // How many of `stig_ids` name a requirement of this STIG.
  size_t CountCovered(const std::set<std::string>& stig_ids) const;
  // "V1R12" from version and release_info; empty when either lacks a number.
  std::string RevisionName() const;
};

// The largest DISA STIG file accepted: DISA's biggest STIGs are a few MB.
inline constexpr size_t kMaxDisaStigBytes = 32u << 20;

// Parses `xml`, naming `source` in every error: DataLoss when it is not well-formed XML,
// InvalidArgument when it declares a DOCTYPE (entities), when it holds no XCCDF Benchmark, when the Benchmark is not
// DISA's (a Group id that is not a V- id), or when a Rule lacks its id or STIG id ("<source>: Group V-238213: the Rule
// has no <version>, the STIG id").
Result<DisaStig> ParseDisaStig(std::string_view xml, std::string_view source);

// Reads and parses the file at `path`.
Result<DisaStig> ReadDisaStig(const std::string& path);

// Every *.xml file of `dir`, sorted by name. NotFound when `dir` is not a directory; the first
// file's error otherwise; InvalidArgument when two files hold the same benchmark id and revision.
Result<std::vector<DisaStig>> ReadDisaStigDirectory(const std::string& dir);

// Of `stigs`, the one whose STIG ids cover most of `stig_ids` (the ids a batch's SSG rules name),
// the first on a tie; null when none covers any.
const DisaStig* MatchingDisaStig(const std::vector<DisaStig>& stigs, const std::set<std::string>& stig_ids);

}  // namespace temper::stig
