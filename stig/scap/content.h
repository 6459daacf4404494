// Content: one SCAP source datastream (ssg-*-ds.xml) with one profile chosen, read through
// libopenscap into plain values.
//
// The roles need a rule's title, description, rationale, check and fix text; reports need its
// STIG id, CCIs and SRGs; the evaluator needs to know which ids exist. Content::Load parses the
// datastream once (about 1 s for the 11 MB Ubuntu 20.04 content) and keeps only C++ values, so no
// libopenscap object outlives the call and a Content can be shared freely.
//
// Fix text is the SCAP Security Guide bash remediation ("urn:xccdf:fix:script:sh") with its
// <sub idref="var_..."/> placeholders replaced by the values the chosen profile selects.
//
// Thread safety: Load uses libopenscap, whose initialisation and error state are process-global;
// do not run two Loads at once. A loaded Content is immutable and safe to read from any thread.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "stig/scap/check_footprint.h"
#include "stig/scap/classification.h"

namespace temper::stig {

// The Debian 12 package ssg-debderived installs the Ubuntu 20.04 STIG content here.
inline constexpr std::string_view kDefaultContentDir = "/usr/share/xml/scap/ssg/content";
inline constexpr std::string_view kUbuntu2004Datastream = "ssg-ubuntu2004-ds.xml";
inline constexpr std::string_view kStigProfile = "xccdf_org.ssgproject.content_profile_stig";
// SCAP Security Guide ids are "<prefix><name>"; users may type just the name.
inline constexpr std::string_view kRulePrefix = "xccdf_org.ssgproject.content_rule_";
inline constexpr std::string_view kProfilePrefix = "xccdf_org.ssgproject.content_profile_";

struct ProfileInfo {
  std::string id;
  std::string title;
  std::string description;
};

// What SCAP Security Guide says about a rule's fix in the attributes of its XCCDF <fix> element:
// whether it needs a reboot to take effect, how disruptive and complex it is, and its strategy.
// SSG 0.1.65 sets them on some fix systems only (for Ubuntu 20.04, 258 of 429 bash fixes; e.g. the
// audit rules' bash fixes carry none while their Ansible fixes do), so they are read from the bash
// fix when it declares any, else from the first other fix of the rule that does.
struct FixMetadata {
  bool declared = false;   // some fix of the rule declares these attributes
  std::string system;      // the fix they were read from ("urn:xccdf:fix:script:sh", ...); "" when not declared
  bool reboot = false;     // the fix takes effect only after a reboot
  std::string disruption;  // "low", "medium", "high"; "" when not declared
  std::string complexity;  // as disruption
  std::string strategy;    // "configure", "disable", "enable", "restrict", "patch", ...; "" when not declared
};

struct RuleInfo {
  std::string id;  // full XCCDF id, xccdf_org.ssgproject.content_rule_...
  std::string title;
  std::string severity;  // "high", "medium", "low", "info" or "unknown"
  // The innermost XCCDF Group holding the rule ("xccdf_org.ssgproject.content_group_sshd"): rules
  // in one group configure one component, so lessons learnt on one help its neighbours.
  std::string group_id;
  std::string description;  // XHTML markup reduced to text
  std::string rationale;
  // The OVAL definition the check runs, its title, and the OVAL test types reachable from it
  // ("oval:ssg-sshd_disable_root_login:def:1", ...). Empty for rules with no OVAL check.
  std::string oval_definition_id;
  std::string check_summary;
  // The check written out for a model (oval_criteria.h); empty for rules with no OVAL check.
  std::string check_criteria;
  std::vector<std::string> oval_test_types;
  // The files the check reads (check_footprint.h); untied when there is no OVAL check.
  CheckFootprint footprint{.tied = false, .untied_because = "no OVAL check", .paths = {}};
  // Bash fix with profile values substituted; empty when SSG ships none.
  std::string fix_bash;
  FixMetadata fix_metadata;
  // References: STIG ids (UBTU-20-010047), CCIs (CCI-000366), SRGs (SRG-OS-000480-GPOS-00227).
  std::vector<std::string> stig_ids;
  std::vector<std::string> ccis;
  std::vector<std::string> srgs;
  Classification classification;
};

class Content {
 public:
  // Loads `datastream` (a path, or a file name in `content_dir`) and selects `profile` (a full id,
  // or its suffix after "_profile_", e.g. "stig"). The datastream must keep to the content policy
  // (content_policy.h: OVAL and OCIL checks only, nothing outside the datastream). Where a
  // datastream may come from is the caller's to check (content_trust.h).
  // Errors: NotFound for a missing datastream (listing close file names in its directory) or an
  // unknown profile (listing close profile ids); PermissionDenied for content the policy refuses
  // (naming each rule and check system or href); DataLoss when the file is not a well-formed SCAP
  // source datastream, with libopenscap's message and the file name.
  static Result<Content> Load(std::string_view datastream, std::string_view profile,
                              std::string_view content_dir = kDefaultContentDir);

  const std::string& datastream_path() const { return path_; }
  const std::string& benchmark_id() const { return benchmark_id_; }
  // The benchmark's <version> element text ("0.1.66"); empty when it has none. A fix proven under
  // one version of the content is reused only under the same one (orchestrator/library/).
  const std::string& benchmark_version() const { return benchmark_version_; }
  const std::vector<ProfileInfo>& profiles() const { return profiles_; }
  const ProfileInfo& profile() const { return profile_; }
  // The rules the chosen profile selects, in benchmark order.
  const std::vector<std::string>& profile_rule_ids() const { return profile_rule_ids_; }

  // Resolves a full rule id or an SSG short name ("sshd_disable_root_login") to a full id of a rule
  // in the benchmark. NotFound names the id and lists close matches.
  Result<std::string> ResolveRuleId(std::string_view id) const;
  // The rule with a full or short id; NotFound as for ResolveRuleId.
  Result<const RuleInfo*> Rule(std::string_view id) const;
  // Every rule in the benchmark (selected by the profile or not), by full id.
  const std::map<std::string, RuleInfo>& rules() const { return rules_; }

 private:
  std::string path_;
  std::string benchmark_id_;
  std::string benchmark_version_;
  std::vector<ProfileInfo> profiles_;
  ProfileInfo profile_;
  std::vector<std::string> profile_rule_ids_;
  std::map<std::string, RuleInfo> rules_;
};

// Resolves a datastream argument as Content::Load does, without loading it. NotFound lists close
// file names in the directory.
Result<std::string> ResolveDatastreamPath(std::string_view datastream, std::string_view content_dir);

}  // namespace temper::stig
