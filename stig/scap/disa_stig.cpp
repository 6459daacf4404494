#include "stig/scap/disa_stig.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <fmt/format.h>

#include "stig/scap/scap_namespaces.h"
#include "stig/scap/xml_nodes.h"

namespace temper::stig {
namespace {

using xml::Attribute;
using xml::Child;
using xml::Children;
using xml::Name;
using xml::Namespace;
using xml::Text;

constexpr std::string_view kLegacySystem = "http://cyber.mil/legacy";
constexpr std::string_view kCciSystem = "http://cyber.mil/cci";

std::string WithoutPrefix(std::string id, std::string_view prefix) {
  return id.starts_with(prefix) ? id.substr(prefix.size()) : id;
}

// The first XCCDF Benchmark at or below `n`, depth first (a datastream nests it in a component).
const xmlNode* FindBenchmark(const xmlNode* n) {
  if (Name(n) == "Benchmark" && IsXccdfNamespace(Namespace(n))) return n;
  for (const xmlNode* c : Children(n)) {
    if (const xmlNode* b = FindBenchmark(c)) return b;
  }
  return nullptr;
}

// Undoes the one level of escaping DISA applies to text inside its description markup.
std::string Unescaped(std::string_view s) {
  static constexpr std::pair<std::string_view, char> kEntities[] = {{"&lt;", '<'},
                                                                    {"&gt;", '>'},
                                                                    {"&quot;", '"'},
                                                                    {"&apos;", '\''},
                                                                    {"&amp;", '&'}};
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    bool replaced = false;
    if (s[i] == '&') {
      for (const auto& [entity, c] : kEntities) {
        if (s.substr(i).starts_with(entity)) {
          out += c;
          i += entity.size();
          replaced = true;
          break;
        }
      }
    }
    if (!replaced) out += s[i++];
  }
  return out;
}

// The text between <tag> and </tag> in DISA's description markup; empty when absent.
std::string DescriptionField(std::string_view markup, std::string_view tag) {
  std::string open = fmt::format("<{}>", tag), close = fmt::format("</{}>", tag);
  size_t begin = markup.find(open);
  if (begin == std::string_view::npos) return "";
  begin += open.size();
  size_t end = markup.find(close, begin);
  if (end == std::string_view::npos) return "";
  return Unescaped(markup.substr(begin, end - begin));
}

Result<DisaStigRule> ReadRule(const xmlNode* group, std::string_view source) {
  DisaStigRule r;
  r.vuln_id = WithoutPrefix(Attribute(group, "id"), kDisaGroupPrefix);
  if (!r.vuln_id.starts_with("V-")) {
    return Status::InvalidArgument(fmt::format(
        "{}: Group \"{}\" is not a DISA vulnerability id (V-...): this is not a DISA STIG", source, r.vuln_id));
  }
  r.group_title = Text(Child(group, "title"));
  const xmlNode* rule = Child(group, "Rule");
  if (!rule) return Status::InvalidArgument(fmt::format("{}: Group {} has no Rule", source, r.vuln_id));
  r.rule_id = WithoutPrefix(Attribute(rule, "id"), kDisaRulePrefix);
  if (r.rule_id.empty())
    return Status::InvalidArgument(fmt::format("{}: Group {}: the Rule has no id", source, r.vuln_id));
  r.stig_id = Text(Child(rule, "version"));
  if (r.stig_id.empty()) {
    return Status::InvalidArgument(
        fmt::format("{}: Group {}: the Rule has no <version>, the STIG id", source, r.vuln_id));
  }
  r.severity = Attribute(rule, "severity");
  r.weight = Attribute(rule, "weight");
  if (r.weight.empty()) r.weight = "10.0";
  r.title = Text(Child(rule, "title"));
  std::string markup = Text(Child(rule, "description"));
  r.discussion = DescriptionField(markup, "VulnDiscussion");
  r.false_positives = DescriptionField(markup, "FalsePositives");
  r.false_negatives = DescriptionField(markup, "FalseNegatives");
  r.documentable = DescriptionField(markup, "Documentable");
  r.mitigations = DescriptionField(markup, "Mitigations");
  r.severity_override_guidance = DescriptionField(markup, "SeverityOverrideGuidance");
  r.potential_impacts = DescriptionField(markup, "PotentialImpacts");
  r.third_party_tools = DescriptionField(markup, "ThirdPartyTools");
  r.mitigation_control = DescriptionField(markup, "MitigationControl");
  r.responsibility = DescriptionField(markup, "Responsibility");
  r.ia_controls = DescriptionField(markup, "IAControls");
  r.fix_text = Text(Child(rule, "fixtext"));
  if (const xmlNode* check = Child(rule, "check")) {
    r.check_content = Text(Child(check, "check-content"));
    r.check_content_ref = Attribute(Child(check, "check-content-ref"), "name");
  }
  for (const xmlNode* ident : Children(rule)) {
    if (Name(ident) != "ident") continue;
    std::string system = Attribute(ident, "system");
    if (system == kCciSystem) r.ccis.push_back(Text(ident));
    if (system == kLegacySystem) r.legacy_ids.push_back(Text(ident));
  }
  return r;
}

Result<std::string> ReadWholeFile(const std::string& path) {
  std::error_code ec;
  auto size = std::filesystem::file_size(path, ec);
  if (ec) return Status::NotFound(fmt::format("DISA STIG {}: {}", path, ec.message()));
  if (size > kMaxDisaStigBytes) {
    return Status::InvalidArgument(
        fmt::format("DISA STIG {}: {} bytes; at most {} bytes", path, size, kMaxDisaStigBytes));
  }
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  if (!in || in.bad()) return Status::IOError(fmt::format("DISA STIG {}: cannot read it", path));
  return s.str();
}

}  // namespace

const DisaStigRule* DisaStig::FindByStigId(std::string_view stig_id) const {
  for (const DisaStigRule& r : rules) {
    if (r.stig_id == stig_id) return &r;
  }
  return nullptr;
}

size_t DisaStig::CountCovered(const std::set<std::string>& stig_ids) const {
  size_t count = 0;
  for (const DisaStigRule& r : rules) count += stig_ids.count(r.stig_id);
  return count;
}

std::string DisaStig::RevisionName() const {
  auto digits = [](std::string_view s) {
    size_t b = s.find_first_of("0123456789");
    if (b == std::string_view::npos) return std::string();
    size_t e = s.find_first_not_of("0123456789", b);
    return std::string(s.substr(b, e == std::string_view::npos ? std::string_view::npos : e - b));
  };
  std::string v = digits(version);
  std::string_view release = release_info;
  size_t at = release.find("Release:");
  std::string r = at == std::string_view::npos ? std::string() : digits(release.substr(at));
  return v.empty() || r.empty() ? std::string() : fmt::format("V{}R{}", v, r);
}

Result<DisaStig> ParseDisaStig(std::string_view text, std::string_view source) {
  if (text.size() > kMaxDisaStigBytes) {
    return Status::InvalidArgument(
        fmt::format("{}: {} bytes; at most {} bytes", source, text.size(), kMaxDisaStigBytes));
  }
  xml::ParserPtr ctxt(xmlNewParserCtxt());
  if (!ctxt) return Status::ResourceExhausted("libxml2 could not allocate a parser context");
  // No network, no entity expansion, no DTD: the file may come from a client.
  xml::DocPtr doc(xmlCtxtReadMemory(ctxt.get(), text.data(), static_cast<int>(text.size()), nullptr, nullptr,
                                    XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING));
  if (!doc) {
    const xmlError* e = xmlCtxtGetLastError(ctxt.get());
    std::string message = e && e->message ? std::string(e->message) : "unknown error";
    while (!message.empty() && message.back() == '\n') message.pop_back();
    return Status::DataLoss(fmt::format("{}:{}: not well-formed XML: {}", source, e ? e->line : 0, message));
  }
  // Entities are left unexpanded by the parser but would be expanded as text is read: a document
  // type, which DISA's files never carry, is refused before anything is read (no billion laughs).
  if (doc->intSubset) {
    return Status::InvalidArgument(
        fmt::format("{}: declares a DOCTYPE; DISA's STIG files have none and temper reads none", source));
  }
  const xmlNode* root = xmlDocGetRootElement(doc.get());
  const xmlNode* benchmark = root ? FindBenchmark(root) : nullptr;
  if (!benchmark) return Status::InvalidArgument(fmt::format("{}: no XCCDF Benchmark in it", source));
  DisaStig stig;
  stig.source = std::string(source);
  stig.benchmark_id = WithoutPrefix(Attribute(benchmark, "id"), kDisaBenchmarkPrefix);
  stig.title = Text(Child(benchmark, "title"));
  stig.description = Text(Child(benchmark, "description"));
  stig.version = Text(Child(benchmark, "version"));
  for (const xmlNode* c : Children(benchmark)) {
    if (Name(c) == "plain-text" && Attribute(c, "id") == "release-info") stig.release_info = Text(c);
    if (Name(c) != "Group") continue;
    TEMPER_ASSIGN_OR_RETURN(DisaStigRule rule, ReadRule(c, source));
    stig.rules.push_back(std::move(rule));
  }
  if (stig.benchmark_id.empty()) return Status::InvalidArgument(fmt::format("{}: the Benchmark has no id", source));
  if (stig.rules.empty()) {
    return Status::InvalidArgument(
        fmt::format("{}: Benchmark {} has no Group: this is not a DISA STIG", source, stig.benchmark_id));
  }
  return stig;
}

Result<DisaStig> ReadDisaStig(const std::string& path) {
  TEMPER_ASSIGN_OR_RETURN(std::string text, ReadWholeFile(path));
  return ParseDisaStig(text, path);
}

Result<std::vector<DisaStig>> ReadDisaStigDirectory(const std::string& dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) return Status::NotFound(fmt::format("{} is not a directory", dir));
  std::vector<std::string> paths;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    if (entry.path().extension() == ".xml" && entry.is_regular_file()) paths.push_back(entry.path().string());
  }
  if (ec) return Status::IOError(fmt::format("listing {}: {}", dir, ec.message()));
  std::sort(paths.begin(), paths.end());
  std::vector<DisaStig> out;
  std::map<std::string, std::string> seen;  // benchmark id and revision -> file
  for (const std::string& path : paths) {
    TEMPER_ASSIGN_OR_RETURN(DisaStig stig, ReadDisaStig(path));
    std::string key = stig.benchmark_id + " " + stig.RevisionName();
    if (auto [it, fresh] = seen.emplace(key, path); !fresh) {
      return Status::InvalidArgument(
          fmt::format("{} and {} are both {} {}: keep one", it->second, path, stig.benchmark_id, stig.RevisionName()));
    }
    out.push_back(std::move(stig));
  }
  return out;
}

const DisaStig* MatchingDisaStig(const std::vector<DisaStig>& stigs, const std::set<std::string>& stig_ids) {
  const DisaStig* best = nullptr;
  size_t best_count = 0;
  for (const DisaStig& stig : stigs) {
    size_t count = stig.CountCovered(stig_ids);
    if (count > best_count) {
      best = &stig;
      best_count = count;
    }
  }
  return best;
}

}  // namespace temper::stig
