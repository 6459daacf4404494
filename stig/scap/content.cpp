#include "stig/scap/content.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "common/closest_match.h"
#include "stig/scap/content_policy.h"
#include "stig/scap/oscap_api.h"
#include "stig/scap/oval_criteria.h"
#include "stig/scap/oval_footprint.h"

namespace temper::stig {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kBashFixSystem = "urn:xccdf:fix:script:sh";

// Takes libopenscap's pending error text (and clears it); "" when none.
std::string TakeOscapError() {
  if (!oscap_err()) return "";
  char* e = oscap_err_get_full_error();
  std::string s = e ? e : "";
  std::free(e);
  return s;
}

std::string Owned(char* s) {
  std::string r = s ? s : "";
  std::free(s);
  return r;
}

// Reduces XCCDF's XHTML fragments to readable text: tags dropped, <br/> and block ends become
// newlines, the five predefined entities decoded.
std::string MarkupToText(std::string_view in) {
  std::string out;
  for (std::size_t i = 0; i < in.size();) {
    if (in[i] == '<') {
      std::size_t end = in.find('>', i);
      if (end == std::string_view::npos) break;
      std::string_view tag = in.substr(i + 1, end - i - 1);
      if (tag.starts_with("br") || tag.starts_with("/p") || tag.starts_with("/li") || tag.starts_with("/pre") ||
          tag.starts_with("html:br") || tag.starts_with("/html:p") || tag.starts_with("/html:li") ||
          tag.starts_with("/html:pre")) {
        out += '\n';
      }
      i = end + 1;
      continue;
    }
    if (in[i] == '&') {
      static const std::pair<std::string_view, char> kEntities[] = {{"&lt;", '<'},
                                                                    {"&gt;", '>'},
                                                                    {"&amp;", '&'},
                                                                    {"&quot;", '"'},
                                                                    {"&apos;", '\''}};
      bool done = false;
      for (const auto& [name, ch] : kEntities) {
        if (in.substr(i).starts_with(name)) {
          out += ch;
          i += name.size();
          done = true;
          break;
        }
      }
      if (done) continue;
      // Numeric references (&#39; &#x27;) for ASCII characters.
      std::size_t semi = in.find(';', i);
      if (semi != std::string_view::npos && semi - i <= 8 && in.substr(i).starts_with("&#")) {
        std::string_view num = in.substr(i + 2, semi - i - 2);
        int base = 10;
        if (!num.empty() && (num[0] == 'x' || num[0] == 'X')) {
          base = 16;
          num.remove_prefix(1);
        }
        char* end = nullptr;
        std::string digits(num);
        long code = std::strtol(digits.c_str(), &end, base);
        if (!digits.empty() && end && *end == '\0' && code > 0 && code < 128) {
          out += static_cast<char>(code);
          i = semi + 1;
          continue;
        }
      }
    }
    out += in[i++];
  }
  // Collapse the blank lines that dropped tags leave behind, and trim.
  std::string text;
  int newlines = 0;
  for (char c : out) {
    newlines = c == '\n' ? newlines + 1 : 0;
    if (newlines <= 2) text += c;
  }
  std::size_t b = text.find_first_not_of(" \t\n");
  std::size_t e = text.find_last_not_of(" \t\n");
  return b == std::string::npos ? "" : text.substr(b, e - b + 1);
}

std::string FirstText(struct oscap_text_iterator* it) {
  std::string s;
  if (it && oscap_text_iterator_has_more(it)) {
    const char* t = oscap_text_get_text(oscap_text_iterator_next(it));
    if (t) s = t;
  }
  if (it) oscap_text_iterator_free(it);
  return s;
}

std::string SeverityName(xccdf_level_t level) {
  switch (level) {
    case XCCDF_INFO:
      return "info";
    case XCCDF_LOW:
      return "low";
    case XCCDF_MEDIUM:
      return "medium";
    case XCCDF_HIGH:
      return "high";
    default:
      return "unknown";
  }
}

// Owns the libopenscap objects of one Load; frees them in reverse order of creation.
struct OscapSession {
  OscapSession() { oscap_init(); }
  ~OscapSession() {
    for (auto* m : oval_models) oval_definition_model_free(m);
    if (policy_model) xccdf_policy_model_free(policy_model);  // owns the benchmark
    else if (benchmark) xccdf_benchmark_free(benchmark);
    if (sds) ds_sds_session_free(sds);  // owns the component sources it handed out
    if (source) oscap_source_free(source);
    oscap_cleanup();
  }
  OscapSession(const OscapSession&) = delete;
  OscapSession& operator=(const OscapSession&) = delete;

  struct oscap_source* source = nullptr;
  struct ds_sds_session* sds = nullptr;
  struct xccdf_benchmark* benchmark = nullptr;
  struct xccdf_policy_model* policy_model = nullptr;
  std::vector<struct oval_definition_model*> oval_models;
  std::map<std::string, struct oval_definition_model*> oval_by_href;
  std::map<std::string, std::vector<std::string>> test_types_by_definition;
  OvalFootprintReader footprints;
};

Result<struct oval_definition_model*> OvalModel(OscapSession& s, const std::string& href, const std::string& path) {
  auto it = s.oval_by_href.find(href);
  if (it != s.oval_by_href.end()) return it->second;
  struct oscap_source* src = ds_sds_session_get_component_by_href(s.sds, href.c_str());
  if (!src) {
    return Status::DataLoss(
        fmt::format("{}: no OVAL component \"{}\" in the datastream: {}", path, href, TakeOscapError()));
  }
  struct oval_definition_model* model = oval_definition_model_import_source(src);
  if (!model) {
    return Status::DataLoss(fmt::format("{}: cannot parse OVAL component \"{}\": {}", path, href, TakeOscapError()));
  }
  s.oval_models.push_back(model);
  s.oval_by_href[href] = model;
  return model;
}

void CollectTestTypes(OscapSession& s, struct oval_criteria_node* node, std::set<std::string>& out, int depth);

const std::vector<std::string>& DefinitionTestTypes(OscapSession& s, struct oval_definition* def, int depth) {
  std::string id = oval_definition_get_id(def) ? oval_definition_get_id(def) : "";
  auto it = s.test_types_by_definition.find(id);
  if (it != s.test_types_by_definition.end()) return it->second;
  std::set<std::string> types;
  // OVAL forbids cycles, but content is untrusted: cap the depth instead of trusting it.
  if (depth < 32) CollectTestTypes(s, oval_definition_get_criteria(def), types, depth + 1);
  return s.test_types_by_definition[id] = std::vector<std::string>(types.begin(), types.end());
}

void CollectTestTypes(OscapSession& s, struct oval_criteria_node* node, std::set<std::string>& out, int depth) {
  if (!node) return;
  switch (oval_criteria_node_get_type(node)) {
    case OVAL_NODETYPE_CRITERIA: {
      struct oval_criteria_node_iterator* it = oval_criteria_node_get_subnodes(node);
      while (it && oval_criteria_node_iterator_has_more(it)) {
        CollectTestTypes(s, oval_criteria_node_iterator_next(it), out, depth);
      }
      if (it) oval_criteria_node_iterator_free(it);
      break;
    }
    case OVAL_NODETYPE_CRITERION: {
      struct oval_test* test = oval_criteria_node_get_test(node);
      if (test) out.insert(oval_subtype_get_text(oval_test_get_subtype(test)));
      break;
    }
    case OVAL_NODETYPE_EXTENDDEF: {
      struct oval_definition* def = oval_criteria_node_get_definition(node);
      if (def) {
        for (const auto& t : DefinitionTestTypes(s, def, depth)) out.insert(t);
      }
      break;
    }
    default:
      break;
  }
}

Status FillCheck(OscapSession& s, struct xccdf_rule* rule, RuleInfo& info, const std::string& path) {
  struct xccdf_check_iterator* checks = xccdf_rule_get_checks(rule);
  std::string href, name;
  while (checks && xccdf_check_iterator_has_more(checks)) {
    struct xccdf_check* check = xccdf_check_iterator_next(checks);
    const char* system = xccdf_check_get_system(check);
    if (!system || kOvalCheckSystem != system) continue;
    struct xccdf_check_content_ref_iterator* refs = xccdf_check_get_content_refs(check);
    if (refs && xccdf_check_content_ref_iterator_has_more(refs)) {
      struct xccdf_check_content_ref* ref = xccdf_check_content_ref_iterator_next(refs);
      href = xccdf_check_content_ref_get_href(ref) ? xccdf_check_content_ref_get_href(ref) : "";
      name = xccdf_check_content_ref_get_name(ref) ? xccdf_check_content_ref_get_name(ref) : "";
    }
    if (refs) xccdf_check_content_ref_iterator_free(refs);
    if (!name.empty()) break;
  }
  if (checks) xccdf_check_iterator_free(checks);
  if (name.empty()) return Status::OK();

  TEMPER_ASSIGN_OR_RETURN(struct oval_definition_model * model, OvalModel(s, href, path));
  struct oval_definition* def = oval_definition_model_get_definition(model, name.c_str());
  if (!def) {
    return Status::DataLoss(
        fmt::format("{}: rule {} checks OVAL definition {}, which {} does not define", path, info.id, name, href));
  }
  info.oval_definition_id = name;
  info.oval_test_types = DefinitionTestTypes(s, def, 0);
  info.footprint = s.footprints.Read(model, def);
  std::string title = oval_definition_get_title(def) ? oval_definition_get_title(def) : "";
  std::string types;
  for (const auto& t : info.oval_test_types) types += (types.empty() ? "" : ", ") + t;
  info.check_summary = fmt::format("OVAL {}: {} (tests: {})", name, title, types);
  info.check_criteria = OvalCriteriaText(def);
  return Status::OK();
}

void FillReferences(struct xccdf_rule* rule, RuleInfo& info) {
  struct oscap_reference_iterator* it = xccdf_rule_get_references(rule);
  while (it && oscap_reference_iterator_has_more(it)) {
    struct oscap_reference* ref = oscap_reference_iterator_next(it);
    const char* t = oscap_reference_get_title(ref);
    if (!t) continue;
    const char* href = oscap_reference_get_href(ref);
    std::string id = t;
    if (id.starts_with("CCI-")) info.ccis.push_back(id);
    else if (id.starts_with("SRG-")) info.srgs.push_back(id);
    // DISA's own references that are neither CCI nor SRG are the STIG ids (UBTU-20-010047).
    else if (href && std::string_view(href).find("public.cyber.mil/stigs") != std::string_view::npos)
      info.stig_ids.push_back(id);
  }
  if (it) oscap_reference_iterator_free(it);
}

std::string FixLevelName(xccdf_level_t level) {
  switch (level) {
    case XCCDF_UNKNOWN:
      return "unknown";
    case XCCDF_INFO:
      return "info";
    case XCCDF_LOW:
      return "low";
    case XCCDF_MEDIUM:
      return "medium";
    case XCCDF_HIGH:
      return "high";
    default:
      return "";
  }
}

std::string StrategyName(xccdf_strategy_t strategy) {
  switch (strategy) {
    case XCCDF_STRATEGY_CONFIGURE:
      return "configure";
    case XCCDF_STRATEGY_DISABLE:
      return "disable";
    case XCCDF_STRATEGY_ENABLE:
      return "enable";
    case XCCDF_STRATEGY_PATCH:
      return "patch";
    case XCCDF_STRATEGY_POLICY:
      return "policy";
    case XCCDF_STRATEGY_RESTRICT:
      return "restrict";
    case XCCDF_STRATEGY_UPDATE:
      return "update";
    case XCCDF_STRATEGY_COMBINATION:
      return "combination";
    default:
      return "";
  }
}

// libopenscap reads an absent attribute as false / not defined / unknown, so a fix that sets none
// of the four reads as all defaults.
FixMetadata MetadataOf(struct xccdf_fix* fix, const char* system) {
  FixMetadata m;
  m.reboot = xccdf_fix_get_reboot(fix);
  m.disruption = FixLevelName(xccdf_fix_get_disruption(fix));
  m.complexity = FixLevelName(xccdf_fix_get_complexity(fix));
  m.strategy = StrategyName(xccdf_fix_get_strategy(fix));
  m.declared = m.reboot || !m.disruption.empty() || !m.complexity.empty() || !m.strategy.empty();
  if (m.declared) m.system = system;
  return m;
}

void FillFix(struct xccdf_rule* rule, struct xccdf_policy* policy, RuleInfo& info) {
  std::optional<FixMetadata> bash, other;
  struct xccdf_fix_iterator* it = xccdf_rule_get_fixes(rule);
  while (it && xccdf_fix_iterator_has_more(it)) {
    struct xccdf_fix* fix = xccdf_fix_iterator_next(it);
    const char* system = xccdf_fix_get_system(fix);
    if (!system) continue;
    FixMetadata m = MetadataOf(fix, system);
    if (kBashFixSystem != system) {
      if (!other && m.declared) other = std::move(m);
      continue;
    }
    if (bash) continue;  // the first bash fix is the one shown
    const char* raw = xccdf_fix_get_content(fix);
    if (!raw) continue;
    std::string resolved = Owned(xccdf_policy_substitute(raw, policy));
    info.fix_bash = MarkupToText(resolved.empty() ? std::string(raw) : resolved);
    bash = std::move(m);
  }
  if (it) xccdf_fix_iterator_free(it);
  if (bash && bash->declared) info.fix_metadata = std::move(*bash);
  else if (other) info.fix_metadata = std::move(*other);
}

// `group` is the id of the innermost XCCDF Group holding `items` (empty at the benchmark's top).
Status CollectRules(OscapSession& s, struct xccdf_item_iterator* items, struct xccdf_policy* policy,
                    const std::string& path, const std::string& group, std::map<std::string, RuleInfo>& rules,
                    std::vector<std::string>& order) {
  while (items && xccdf_item_iterator_has_more(items)) {
    struct xccdf_item* item = xccdf_item_iterator_next(items);
    if (xccdf_item_get_type(item) == XCCDF_GROUP) {
      const char* group_id = xccdf_item_get_id(item);
      Status st =
          CollectRules(s, xccdf_item_get_content(item), policy, path, group_id ? group_id : group, rules, order);
      if (!st.ok()) {
        xccdf_item_iterator_free(items);
        return st;
      }
      continue;
    }
    if (xccdf_item_get_type(item) != XCCDF_RULE) continue;
    struct xccdf_rule* rule = xccdf_item_to_rule(item);
    RuleInfo info;
    info.id = xccdf_rule_get_id(rule) ? xccdf_rule_get_id(rule) : "";
    if (info.id.empty()) continue;
    info.group_id = group;
    info.title = MarkupToText(Owned(xccdf_policy_get_readable_item_title(policy, item, nullptr)));
    info.description = MarkupToText(Owned(xccdf_policy_get_readable_item_description(policy, item, nullptr)));
    info.rationale = MarkupToText(FirstText(xccdf_rule_get_rationale(rule)));
    info.severity = SeverityName(xccdf_rule_get_severity(rule));
    Status st = FillCheck(s, rule, info, path);
    if (!st.ok()) {
      xccdf_item_iterator_free(items);
      return st;
    }
    info.classification = Classify(info.oval_test_types, !info.oval_definition_id.empty());
    FillReferences(rule, info);
    FillFix(rule, policy, info);
    order.push_back(info.id);
    rules.emplace(info.id, std::move(info));
  }
  if (items) xccdf_item_iterator_free(items);
  return Status::OK();
}

}  // namespace

Result<std::string> ResolveDatastreamPath(std::string_view datastream, std::string_view content_dir) {
  if (datastream.empty()) return Status::InvalidArgument("datastream: empty name");
  fs::path p(datastream);
  if (!p.is_absolute() && p.parent_path().empty()) p = fs::path(content_dir) / p;
  std::error_code ec;
  if (fs::is_regular_file(p, ec)) return p.string();
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(p.parent_path(), ec)) {
    if (e.path().extension() == ".xml") names.push_back(e.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return Status::NotFound(
      fmt::format("datastream {} does not exist{}", p.string(), DidYouMean(p.filename().string(), names)));
}

Result<Content> Content::Load(std::string_view datastream, std::string_view profile, std::string_view content_dir) {
  TEMPER_ASSIGN_OR_RETURN(std::string path, ResolveDatastreamPath(datastream, content_dir));
  TEMPER_RETURN_IF_ERROR(CheckContentPolicy(path));
  OscapSession s;
  s.source = oscap_source_new_from_file(path.c_str());
  oscap_document_type_t type = oscap_source_get_scap_type(s.source);
  if (type != OSCAP_DOCUMENT_SDS) {
    std::string why = TakeOscapError();
    return Status::DataLoss(
        fmt::format("{}: not a SCAP source datastream (found {}){}{}", path,
                    type == OSCAP_DOCUMENT_UNKNOWN ? "no SCAP document" : oscap_document_type_to_string(type),
                    why.empty() ? "" : ": ", why));
  }
  s.sds = ds_sds_session_new_from_source(s.source);
  struct oscap_source* xccdf = s.sds ? ds_sds_session_select_checklist(s.sds, nullptr, nullptr, nullptr) : nullptr;
  if (!xccdf) {
    return Status::DataLoss(fmt::format("{}: no XCCDF checklist in the datastream: {}", path, TakeOscapError()));
  }
  s.benchmark = xccdf_benchmark_import_source(xccdf);
  if (!s.benchmark) {
    return Status::DataLoss(fmt::format("{}: cannot parse the XCCDF benchmark: {}", path, TakeOscapError()));
  }
  s.policy_model = xccdf_policy_model_new(s.benchmark);

  Content c;
  c.path_ = path;
  c.benchmark_id_ = xccdf_benchmark_get_id(s.benchmark) ? xccdf_benchmark_get_id(s.benchmark) : "";
  c.benchmark_version_ = xccdf_benchmark_get_version(s.benchmark) ? xccdf_benchmark_get_version(s.benchmark) : "";
  struct xccdf_profile_iterator* pit = xccdf_benchmark_get_profiles(s.benchmark);
  while (pit && xccdf_profile_iterator_has_more(pit)) {
    struct xccdf_profile* p = xccdf_profile_iterator_next(pit);
    ProfileInfo info;
    info.id = xccdf_profile_get_id(p) ? xccdf_profile_get_id(p) : "";
    info.title = MarkupToText(FirstText(xccdf_profile_get_title(p)));
    info.description = MarkupToText(FirstText(xccdf_profile_get_description(p)));
    c.profiles_.push_back(std::move(info));
  }
  if (pit) xccdf_profile_iterator_free(pit);

  std::string wanted(profile);
  if (!wanted.empty() && !wanted.starts_with("xccdf_")) wanted = std::string(kProfilePrefix) + wanted;
  auto found =
      std::find_if(c.profiles_.begin(), c.profiles_.end(), [&](const ProfileInfo& p) { return p.id == wanted; });
  if (found == c.profiles_.end()) {
    std::vector<std::string> ids;
    for (const auto& p : c.profiles_) ids.push_back(p.id);
    std::vector<std::string> shorts;
    for (const auto& id : ids) shorts.push_back(id.starts_with(kProfilePrefix) ? id.substr(kProfilePrefix.size()) : id);
    std::string hint = DidYouMean(wanted, ids);
    if (hint.empty()) hint = DidYouMean(profile, shorts);
    return Status::NotFound(fmt::format("{}: profile \"{}\" does not exist{}", path, profile, hint));
  }
  c.profile_ = *found;
  struct xccdf_policy* policy = xccdf_policy_model_get_policy_by_id(s.policy_model, c.profile_.id.c_str());
  if (!policy) {
    return Status::DataLoss(fmt::format("{}: cannot resolve profile {}: {}", path, c.profile_.id, TakeOscapError()));
  }

  std::vector<std::string> order;
  TEMPER_RETURN_IF_ERROR(CollectRules(s, xccdf_benchmark_get_content(s.benchmark), policy, path, "", c.rules_, order));
  for (const auto& id : order) {
    if (xccdf_policy_is_item_selected(policy, id.c_str())) c.profile_rule_ids_.push_back(id);
  }
  return c;
}

Result<std::string> Content::ResolveRuleId(std::string_view id) const {
  std::string full(id);
  if (!full.starts_with("xccdf_")) full = std::string(kRulePrefix) + full;
  if (rules_.count(full)) return full;
  std::vector<std::string> shorts;
  for (const auto& [rid, info] : rules_) {
    shorts.push_back(rid.starts_with(kRulePrefix) ? rid.substr(kRulePrefix.size()) : rid);
  }
  std::string_view query = id.starts_with(kRulePrefix) ? id.substr(kRulePrefix.size()) : id;
  return Status::NotFound(fmt::format("rule \"{}\" is not in {}{}", id, path_, DidYouMean(query, shorts)));
}

Result<const RuleInfo*> Content::Rule(std::string_view id) const {
  TEMPER_ASSIGN_OR_RETURN(std::string full, ResolveRuleId(id));
  return &rules_.at(full);
}

}  // namespace temper::stig
