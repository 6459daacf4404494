#include "orchestrator/evidence/checklist_cklb.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace temper::evidence {
namespace {

using nlohmann::ordered_json;

// CKL STIG_DATA attribute <-> CKLB rule field, in STIG Viewer's attribute order. Vuln_Num,
// Rule_ID, Check_Content_Ref, STIG_UUID, LEGACY_ID and CCI_REF need more than a rename and are
// handled apart.
constexpr std::pair<const char*, const char*> kRuleFields[] = {
    {"Severity", "severity"},
    {"Group_Title", "group_title"},
    {"Rule_Ver", "rule_version"},
    {"Rule_Title", "rule_title"},
    {"Vuln_Discuss", "discussion"},
    {"IA_Controls", "ia_controls"},
    {"Check_Content", "check_content"},
    {"Fix_Text", "fix_text"},
    {"False_Positives", "false_positives"},
    {"False_Negatives", "false_negatives"},
    {"Documentable", "documentable"},
    {"Mitigations", "mitigations"},
    {"Potential_Impact", "potential_impacts"},
    {"Third_Party_Tools", "third_party_tools"},
    {"Mitigation_Control", "mitigation_control"},
    {"Responsibility", "responsibility"},
    {"Security_Override_Guidance", "security_override_guidance"},
    {"Weight", "weight"},
    {"Class", "classification"},
    {"STIGRef", "stig_ref"},
    {"TargetKey", "target_key"},
};

// STIG_INFO names CKLB carries, and where.
constexpr std::pair<const char*, const char*> kStigFields[] = {{"title", "stig_name"},
                                                               {"stigid", "stig_id"},
                                                               {"version", "version"},
                                                               {"releaseinfo", "release_info"},
                                                               {"uuid", "uuid"}};

constexpr std::string_view kStigSuffix = " Security Technical Implementation Guide";

std::string WithoutSuffix(const std::string& title) {
  return title.ends_with(kStigSuffix) ? title.substr(0, title.size() - kStigSuffix.size()) : title;
}

// Readers that name the JSON path of what they reject.
Result<std::string> Str(const ordered_json& obj, const char* key, const std::string& at) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return std::string();
  if (it->is_string()) return it->get<std::string>();
  if (it->is_number()) return it->dump();  // some writers store weight or size as numbers
  return Status::DataLoss(fmt::format("{}.{}: expected a string", at, key));
}

Result<std::vector<std::string>> StrList(const ordered_json& obj, const char* key, const std::string& at) {
  std::vector<std::string> out;
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return out;
  if (!it->is_array()) return Status::DataLoss(fmt::format("{}.{}: expected an array", at, key));
  for (size_t i = 0; i < it->size(); ++i) {
    if (!(*it)[i].is_string()) return Status::DataLoss(fmt::format("{}.{}[{}]: expected a string", at, key, i));
    out.push_back((*it)[i].get<std::string>());
  }
  return out;
}

Result<const ordered_json*> Array(const ordered_json& obj, const char* key, const std::string& at) {
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_array()) {
    return Status::DataLoss(fmt::format("{}{}{}: expected an array", at, at.empty() ? "" : ".", key));
  }
  return &*it;
}

}  // namespace

std::string WriteCklb(const Checklist& c) {
  const ChecklistAsset& a = c.asset;
  std::string seed = a.host_name;
  ordered_json stigs = ordered_json::array();
  for (const ChecklistStig& stig : c.stigs) {
    std::string stig_uuid = AttributeOf(stig.info, "uuid");
    if (stig_uuid.empty()) stig_uuid = DerivedUuid(AttributeOf(stig.info, "stigid") + "|" + seed);
    seed += "|" + stig_uuid;
    std::string title = AttributeOf(stig.info, "title");
    ordered_json rules = ordered_json::array();
    for (size_t i = 0; i < stig.vulns.size(); ++i) {
      const ChecklistVuln& v = stig.vulns[i];
      std::string vuln_num = AttributeOf(v.data, "Vuln_Num");
      std::string rule_id = AttributeOf(v.data, "Rule_ID");
      std::string group_title = AttributeOf(v.data, "Group_Title");
      ordered_json r;
      r["group_id_src"] = vuln_num;
      r["group_tree"] = ordered_json::array(
          {{{"id", vuln_num}, {"title", group_title}, {"description", "<GroupDescription></GroupDescription>"}}});
      r["group_id"] = vuln_num;
      r["rule_id_src"] = rule_id;
      r["rule_id"] = rule_id.ends_with("_rule") ? rule_id.substr(0, rule_id.size() - 5) : rule_id;
      for (const auto& [attribute, field] : kRuleFields) r[field] = AttributeOf(v.data, attribute);
      r["check_content_ref"] = {{"href", ""}, {"name", AttributeOf(v.data, "Check_Content_Ref")}};
      r["legacy_ids"] = AttributesOf(v.data, "LEGACY_ID");
      r["ccis"] = AttributesOf(v.data, "CCI_REF");
      r["reference_identifier"] = a.target_key;
      r["uuid"] = DerivedUuid(fmt::format("{}|{}|{}", stig_uuid, vuln_num, i));
      std::string rule_stig_uuid = AttributeOf(v.data, "STIG_UUID");
      r["stig_uuid"] = rule_stig_uuid.empty() ? stig_uuid : rule_stig_uuid;
      r["status"] = CklbStatusName(v.status);
      r["overrides"] = ordered_json::object();
      r["comments"] = v.comments;
      r["finding_details"] = v.finding_details;
      rules.push_back(std::move(r));
    }
    ordered_json s;
    s["stig_name"] = title;
    s["display_name"] = WithoutSuffix(title);
    for (const auto& [name, field] : kStigFields) {
      if (std::string_view(field) != "stig_name") s[field] = AttributeOf(stig.info, name);
    }
    s["uuid"] = stig_uuid;
    s["reference_identifier"] = a.target_key;
    s["size"] = stig.vulns.size();
    s["rules"] = std::move(rules);
    stigs.push_back(std::move(s));
  }
  ordered_json doc;
  doc["title"] = !a.host_name.empty() ? a.host_name
                 : c.stigs.empty()    ? std::string("checklist")
                                      : WithoutSuffix(AttributeOf(c.stigs.front().info, "title"));
  doc["id"] = DerivedUuid(seed);
  doc["stigs"] = std::move(stigs);
  doc["active"] = false;
  doc["mode"] = 1;
  doc["has_path"] = true;
  doc["target_data"] = {{"target_type", a.asset_type},
                        {"host_name", a.host_name},
                        {"ip_address", a.host_ip},
                        {"mac_address", a.host_mac},
                        {"fqdn", a.host_fqdn},
                        {"comments", a.target_comment},
                        {"role", a.role},
                        {"is_web_database", a.web_or_database},
                        {"technology_area", a.tech_area},
                        {"web_db_site", a.web_db_site},
                        {"web_db_instance", a.web_db_instance},
                        {"classification", a.marking.empty() ? ordered_json() : ordered_json(a.marking)}};
  doc["cklb_version"] = "1.0";
  return doc.dump(2, ' ', false, ordered_json::error_handler_t::replace) + "\n";
}

Result<Checklist> ReadCklb(std::string_view text, const std::string& source) {
  ordered_json doc = ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return Status::DataLoss(source + ": not valid JSON");
  if (!doc.is_object()) return Status::DataLoss(source + ": expected a JSON object");
  auto fail = [&](const Status& s) { return Status::DataLoss(fmt::format("{}: {}", source, s.message())); };
  Checklist c;
  if (auto t = doc.find("target_data"); t != doc.end() && !t->is_null()) {
    if (!t->is_object()) return fail(Status::DataLoss("target_data: expected an object"));
    ChecklistAsset& a = c.asset;
    const std::pair<const char*, std::string*> fields[] = {{"target_type", &a.asset_type},
                                                           {"host_name", &a.host_name},
                                                           {"ip_address", &a.host_ip},
                                                           {"mac_address", &a.host_mac},
                                                           {"fqdn", &a.host_fqdn},
                                                           {"comments", &a.target_comment},
                                                           {"role", &a.role},
                                                           {"technology_area", &a.tech_area},
                                                           {"web_db_site", &a.web_db_site},
                                                           {"web_db_instance", &a.web_db_instance},
                                                           {"classification", &a.marking}};
    for (const auto& [key, into] : fields) {
      Result<std::string> v = Str(*t, key, "target_data");
      if (!v.ok()) return fail(v.status());
      *into = *v;
    }
    if (auto w = t->find("is_web_database"); w != t->end() && !w->is_null()) {
      if (!w->is_boolean()) return fail(Status::DataLoss("target_data.is_web_database: expected true or false"));
      a.web_or_database = w->get<bool>();
    }
  }
  Result<const ordered_json*> stigs = Array(doc, "stigs", "");
  if (!stigs.ok()) return fail(stigs.status());
  for (size_t si = 0; si < (*stigs)->size(); ++si) {
    const ordered_json& s = (**stigs)[si];
    std::string at = fmt::format("stigs[{}]", si);
    if (!s.is_object()) return fail(Status::DataLoss(at + ": expected an object"));
    ChecklistStig stig;
    for (const auto& [name, field] : kStigFields) {
      Result<std::string> v = Str(s, field, at);
      if (!v.ok()) return fail(v.status());
      stig.info.emplace_back(name, *v);
    }
    if (si == 0) {
      Result<std::string> key = Str(s, "reference_identifier", at);
      if (!key.ok()) return fail(key.status());
      c.asset.target_key = *key;
    }
    Result<const ordered_json*> rules = Array(s, "rules", at);
    if (!rules.ok()) return fail(rules.status());
    for (size_t ri = 0; ri < (*rules)->size(); ++ri) {
      const ordered_json& r = (**rules)[ri];
      std::string rat = fmt::format("{}.rules[{}]", at, ri);
      if (!r.is_object()) return fail(Status::DataLoss(rat + ": expected an object"));
      ChecklistVuln v;
      auto get = [&](const char* key) -> Result<std::string> { return Str(r, key, rat); };
      Result<std::string> vuln_num = get("group_id_src");
      if (vuln_num.ok() && vuln_num->empty()) vuln_num = get("group_id");
      if (!vuln_num.ok()) return fail(vuln_num.status());
      v.data.emplace_back("Vuln_Num", *vuln_num);
      Result<std::string> rule_id = get("rule_id_src");
      if (!rule_id.ok()) return fail(rule_id.status());
      v.data.emplace_back("Rule_ID", *rule_id);
      for (const auto& [attribute, field] : kRuleFields) {
        Result<std::string> value = get(field);
        if (!value.ok()) return fail(value.status());
        v.data.emplace_back(attribute, *value);
      }
      std::string ref;
      if (auto cr = r.find("check_content_ref"); cr != r.end() && cr->is_object()) {
        Result<std::string> name = Str(*cr, "name", rat + ".check_content_ref");
        if (!name.ok()) return fail(name.status());
        ref = *name;
      }
      v.data.emplace_back("Check_Content_Ref", ref);
      Result<std::string> stig_uuid = get("stig_uuid");
      if (!stig_uuid.ok()) return fail(stig_uuid.status());
      v.data.emplace_back("STIG_UUID", *stig_uuid);
      for (const auto& [key, attribute] : {std::pair{"legacy_ids", "LEGACY_ID"}, std::pair{"ccis", "CCI_REF"}}) {
        Result<std::vector<std::string>> list = StrList(r, key, rat);
        if (!list.ok()) return fail(list.status());
        for (std::string& value : *list) v.data.emplace_back(attribute, std::move(value));
      }
      Result<std::string> status = get("status");
      if (!status.ok()) return fail(status.status());
      Result<ChecklistStatus> parsed = ParseCklbStatus(*status);
      if (!parsed.ok()) return fail(Status::DataLoss(rat + ".status: " + parsed.status().message()));
      v.status = *parsed;
      Result<std::string> comments = get("comments");
      Result<std::string> details = get("finding_details");
      if (!comments.ok()) return fail(comments.status());
      if (!details.ok()) return fail(details.status());
      v.comments = *comments;
      v.finding_details = *details;
      stig.vulns.push_back(std::move(v));
    }
    c.stigs.push_back(std::move(stig));
  }
  return c;
}

}  // namespace temper::evidence
