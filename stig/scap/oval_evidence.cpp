#include "stig/scap/oval_evidence.h"

#include <algorithm>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <set>

#include <fmt/format.h>

#include "stig/scap/scap_namespaces.h"
#include "stig/scap/xml_nodes.h"

namespace temper::stig {
namespace {

constexpr std::string_view kArfNs = "http://scap.nist.gov/schema/asset-reporting-format/1.1";
constexpr std::string_view kOvalDefsSystem = "http://oval.mitre.org/XMLSchema/oval-definitions-5";

using xml::Child;
using xml::Children;
using xml::CtxtFree;
using xml::DocFree;
using xml::Attribute;
using xml::Name;
using xml::Namespace;
using xml::Text;

// The value cut to kMaxFieldBytes at a UTF-8 character boundary, saying how much was left out.
std::string Capped(std::string v) {
  if (v.size() <= kMaxFieldBytes) return v;
  size_t cut = kMaxFieldBytes;
  while (cut > 0 && (static_cast<unsigned char>(v[cut]) & 0xC0) == 0x80) --cut;
  size_t dropped = v.size() - cut;
  v.resize(cut);
  return v + fmt::format("… ({} more bytes)", dropped);
}

// Every element named `name` below `n` (not descending into matches).
void FindAll(const xmlNode* n, std::string_view name, std::vector<const xmlNode*>& out) {
  for (const xmlNode* c : Children(n)) {
    if (Name(c) == name) {
      out.push_back(c);
    } else {
      FindAll(c, name, out);
    }
  }
}

using StateFields = std::function<std::string(const std::string& state_id)>;

// Fields of an OVAL object, state or item: one per child element, "set"/"filter"/variable
// references described rather than dropped (a filter with the state it matches, from `state`).
OvalFields FieldsOf(const xmlNode* n, const StateFields& state = nullptr) {
  OvalFields out;
  for (const xmlNode* c : Children(n)) {
    std::string name(Name(c));
    if (name == "behaviors") continue;
    std::string value = Text(c);
    if (name == "set") value = "(a set of objects)";
    if (name == "filter" && state) {
      std::string action = Attribute(c, "action");
      value = fmt::format("{} items where {} ({})", action.empty() ? "exclude" : action, state(value), value);
    }
    std::string var = Attribute(c, "var_ref");
    if (value.empty() && !var.empty()) value = fmt::format("(the value of {})", var);
    std::string op = Attribute(c, "operation");
    if (!op.empty() && op != "equals") value += fmt::format(" [{}]", op);
    std::string status = Attribute(c, "status");
    if (!status.empty() && status != "exists") value += fmt::format(" [{}]", status);
    out.emplace_back(std::move(name), Capped(std::move(value)));
  }
  return out;
}

std::string FieldsText(const OvalFields& fields) {
  std::vector<std::string> parts;
  for (const auto& [k, v] : fields) parts.push_back(fmt::format("{}={}", k, v));
  return fmt::format("{}", fmt::join(parts, "; "));
}

// One OVAL report of the ARF file (an <oval_results>), indexed by id.
class OvalReport {
 public:
  explicit OvalReport(const xmlNode* oval_results) {
    const xmlNode* defs = Child(oval_results, "oval_definitions");
    Index(Child(defs, "definitions"), "id", definitions_);
    Index(Child(defs, "tests"), "id", tests_);
    Index(Child(defs, "objects"), "id", objects_);
    Index(Child(defs, "states"), "id", states_);
    const xmlNode* system = Child(Child(oval_results, "results"), "system");
    Index(Child(system, "definitions"), "definition_id", definition_results_);
    Index(Child(system, "tests"), "test_id", test_results_);
    const xmlNode* sc = Child(system, "oval_system_characteristics");
    Index(Child(sc, "collected_objects"), "id", collected_);
    Index(Child(sc, "system_data"), "id", items_);
  }

  // `id` and what it extends, appended to `out` unless already there.
  void AddDefinition(const std::string& id, std::vector<OvalDefinition>& out) const {
    if (std::any_of(out.begin(), out.end(), [&](const OvalDefinition& d) { return d.id == id; })) return;
    OvalDefinition def;
    def.id = id;
    if (const xmlNode* d = Find(definitions_, id)) def.title = Text(Child(Child(d, "metadata"), "title"));
    const xmlNode* result = Find(definition_results_, id);
    def.result = result ? Attribute(result, "result") : "not evaluated";
    if (result) Criteria(Child(result, "criteria"), def);
    out.push_back(std::move(def));
    for (const std::string& extended : std::vector<std::string>(out.back().extends)) AddDefinition(extended, out);
  }

 private:
  using Index_ = std::map<std::string, const xmlNode*, std::less<>>;

  static void Index(const xmlNode* parent, const char* key, Index_& into) {
    for (const xmlNode* c : Children(parent)) into.emplace(Attribute(c, key), c);
  }
  static const xmlNode* Find(const Index_& index, const std::string& id) {
    auto it = index.find(id);
    return it == index.end() ? nullptr : it->second;
  }

  void Criteria(const xmlNode* criteria, OvalDefinition& def) const {
    for (const xmlNode* c : Children(criteria)) {
      if (Name(c) == "criteria") {
        Criteria(c, def);
      } else if (Name(c) == "extend_definition") {
        def.extends.push_back(Attribute(c, "definition_ref"));
      } else if (Name(c) == "criterion") {
        std::string id = Attribute(c, "test_ref");
        if (std::none_of(def.tests.begin(), def.tests.end(), [&](const OvalTest& t) { return t.id == id; })) {
          def.tests.push_back(Test(id, Attribute(c, "negate") == "true"));
        }
      }
    }
  }

  OvalTest Test(const std::string& id, bool negated) const {
    OvalTest t;
    t.id = id;
    t.negated = negated;
    if (const xmlNode* d = Find(tests_, id)) {
      t.type = std::string(Name(d));
      t.comment = Attribute(d, "comment");
      if (const xmlNode* o = Child(d, "object")) t.object_id = Attribute(o, "object_ref");
      for (const xmlNode* s : Children(d)) {
        if (Name(s) != "state") continue;
        if (const xmlNode* state = Find(states_, Attribute(s, "state_ref"))) {
          OvalFields f = FieldsOf(state);
          t.state.insert(t.state.end(), f.begin(), f.end());
        }
      }
    }
    if (const xmlNode* o = Find(objects_, t.object_id)) {
      t.object = FieldsOf(o, [this](const std::string& state_id) {
        const xmlNode* s = Find(states_, state_id);
        return s ? FieldsText(FieldsOf(s)) : std::string("(state not in the file)");
      });
    }
    if (const xmlNode* c = Find(collected_, t.object_id)) t.object_flag = Attribute(c, "flag");
    const xmlNode* r = Find(test_results_, id);
    if (!r) {
      t.result = "not evaluated";
      return t;
    }
    t.result = Attribute(r, "result");
    t.check_existence = Attribute(r, "check_existence");
    t.check = Attribute(r, "check");
    for (const xmlNode* c : Children(r)) {
      if (Name(c) == "tested_variable") {
        t.variables.emplace_back(Attribute(c, "variable_id"), Capped(Text(c)));
      } else if (Name(c) == "tested_item") {
        OvalItem item;
        item.id = Attribute(c, "item_id");
        item.result = Attribute(c, "result");
        if (const xmlNode* data = Find(items_, item.id)) {
          item.type = std::string(Name(data));
          item.status = Attribute(data, "status");
          if (item.status.empty()) item.status = "exists";
          item.fields = FieldsOf(data);
        }
        t.items.push_back(std::move(item));
      }
    }
    // The items that failed the test decided a failing verdict: keep them first within the cap.
    std::stable_partition(t.items.begin(), t.items.end(), [](const OvalItem& i) { return i.result == "false"; });
    t.items_total = t.items.size();
    if (t.items.size() > kMaxItemsPerTest) t.items.resize(kMaxItemsPerTest);
    return t;
  }

  Index_ definitions_, tests_, objects_, states_, definition_results_, test_results_, collected_, items_;
};

}  // namespace

std::string RuleEvidence::Text() const {
  std::string out;
  for (const OvalDefinition& d : definitions) {
    out += fmt::format("OVAL definition {}{}: {}\n", d.id, d.title.empty() ? "" : fmt::format(" \"{}\"", d.title),
                       d.result);
    if (!d.extends.empty()) out += fmt::format("  extends {}\n", fmt::join(d.extends, ", "));
    for (const OvalTest& t : d.tests) {
      std::string how = t.check_existence.empty() ? "" : "check_existence=" + t.check_existence + ", ";
      how += "check=" + (t.check.empty() ? std::string("-") : t.check);
      out += fmt::format("  test {}{}{} ({}): {}\n", t.negated ? "NOT " : "", t.id, t.type.empty() ? "" : " " + t.type,
                         how, t.result);
      if (!t.comment.empty()) out += fmt::format("    checks: {}\n", t.comment);
      if (!t.object_id.empty()) {
        out += fmt::format("    object {}{}: {}\n", t.object_id,
                           t.object_flag.empty() ? "" : " [" + t.object_flag + "]", FieldsText(t.object));
      }
      if (!t.state.empty()) out += fmt::format("    expected state: {}\n", FieldsText(t.state));
      for (const auto& [id, value] : t.variables) out += fmt::format("    variable {} = {}\n", id, value);
      for (const OvalItem& i : t.items) {
        out += fmt::format("    item {} {} ({}): {}\n", i.id, i.type, i.status, i.result);
        for (const auto& [k, v] : i.fields) out += fmt::format("      {}: {}\n", k, v);
      }
      if (t.items_total > t.items.size()) {
        out += fmt::format("    ({} more items not shown)\n", t.items_total - t.items.size());
      }
    }
  }
  return out;
}

Result<std::vector<RuleEvidence>> ReadOvalEvidence(const std::string& arf_path,
                                                   const std::vector<std::string>& rule_ids) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(arf_path, ec)) return Status::NotFound("no ARF file at " + arf_path);
  std::unique_ptr<xmlParserCtxt, CtxtFree> ctxt(xmlNewParserCtxt());
  if (!ctxt) return Status::ResourceExhausted("libxml2 could not allocate a parser context");
  // No network, no entity expansion, no DTD: the file may come from a host temper does not trust.
  std::unique_ptr<xmlDoc, DocFree> doc(xmlCtxtReadFile(ctxt.get(), arf_path.c_str(), nullptr,
                                                       XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING));
  if (!doc) {
    const xmlError* e = xmlCtxtGetLastError(ctxt.get());
    return Status::DataLoss(fmt::format("{}:{}: not well-formed XML: {}", arf_path, e ? e->line : 0,
                                        e && e->message ? std::string(e->message) : "unknown error"));
  }
  const xmlNode* root = xmlDocGetRootElement(doc.get());
  if (!root || Name(root) != "asset-report-collection" || Namespace(root) != kArfNs) {
    return Status::DataLoss(arf_path + ": not an ARF file (the root is not arf:asset-report-collection)");
  }
  std::map<std::string, const xmlNode*> reports;  // report id -> its content's element
  const xmlNode* test_result = nullptr;
  for (const xmlNode* report : Children(Child(root, "reports"))) {
    const xmlNode* content = Child(report, "content");
    std::vector<const xmlNode*> body = Children(content);
    if (body.empty()) continue;
    reports[Attribute(report, "id")] = body.front();
    if (!test_result) {
      std::vector<const xmlNode*> found;
      if (Name(body.front()) == "TestResult") found.push_back(body.front());
      FindAll(body.front(), "TestResult", found);
      for (const xmlNode* f : found) {
        if (Namespace(f) == kXccdf12Ns) test_result = f;
      }
    }
  }
  if (!test_result) return Status::DataLoss(arf_path + ": no XCCDF 1.2 TestResult in its reports");

  std::set<std::string> wanted(rule_ids.begin(), rule_ids.end());
  std::map<std::string, std::unique_ptr<OvalReport>> oval;
  std::vector<RuleEvidence> out;
  for (const xmlNode* rr : Children(test_result)) {
    if (Name(rr) != "rule-result") continue;
    RuleEvidence ev;
    ev.rule_id = Attribute(rr, "idref");
    ev.result = Text(Child(rr, "result"));
    if (wanted.empty() ? ev.result == "notselected" : !wanted.contains(ev.rule_id)) continue;
    std::vector<std::string> messages;
    for (const xmlNode* c : Children(rr)) {
      if (Name(c) == "message") messages.push_back(Text(c));
      if (Name(c) != "check" || Attribute(c, "system") != kOvalDefsSystem) continue;
      for (const xmlNode* ref : Children(c)) {
        if (Name(ref) != "check-content-ref") continue;
        std::string href = Attribute(ref, "href");
        std::string report_id = href.starts_with("#") ? href.substr(1) : href;
        auto it = reports.find(report_id);
        if (it == reports.end() || Name(it->second) != "oval_results") {
          return Status::DataLoss(fmt::format("{}: rule {} refers to OVAL results \"{}\" that the file does not hold",
                                              arf_path, ev.rule_id, href));
        }
        auto& index = oval[report_id];
        if (!index) index = std::make_unique<OvalReport>(it->second);
        std::string name = Attribute(ref, "name");
        if (!name.empty()) index->AddDefinition(name, ev.definitions);
      }
    }
    ev.message = fmt::format("{}", fmt::join(messages, "\n"));
    out.push_back(std::move(ev));
  }
  return out;
}

}  // namespace temper::stig
