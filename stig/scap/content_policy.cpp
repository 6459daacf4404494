#include "stig/scap/content_policy.h"

#include <memory>
#include <set>
#include <vector>

#include <fmt/format.h>

#include "stig/scap/scap_namespaces.h"
#include "stig/scap/xml_reader.h"

namespace temper::stig {
namespace {

constexpr std::string_view kDsNs = "http://scap.nist.gov/schema/scap/source/1.2";
constexpr std::string_view kXlinkNs = "http://www.w3.org/1999/xlink";
constexpr std::string_view kCatalogNs = "urn:oasis:names:tc:entity:xmlns:xml:catalog";
constexpr std::string_view kCpeDictNs = "http://cpe.mitre.org/dictionary/2.0";
constexpr std::string_view kCpeLangNs = "http://cpe.mitre.org/language/2.0";
constexpr std::string_view kSceSystem = "http://open-scap.org/page/SCE";
constexpr std::size_t kMaxListed = 10;

// An attribute's value ("" when absent); libxml2 hands out a copy the caller frees.
std::string Attribute(xmlTextReaderPtr reader, const char* name, std::string_view ns = {}) {
  xmlChar* v = ns.empty() ? xmlTextReaderGetAttribute(reader, BAD_CAST name)
                          : xmlTextReaderGetAttributeNs(reader, BAD_CAST name, BAD_CAST std::string(ns).c_str());
  std::string out(XmlView(v));
  xmlFree(v);
  return out;
}

// A check href to verify once every catalog entry has been seen.
struct PendingHref {
  int line;
  std::string where;  // "rule xccdf_...", "CPE item cpe:/a:...", ...
  std::string element;
  std::string href;
};

class PolicyScan {
 public:
  explicit PolicyScan(const std::string& path) : path_(path) {}

  Status Run() {
    TEMPER_ASSIGN_OR_RETURN(std::unique_ptr<XmlFileReader> reader, XmlFileReader::Open(path_));
    int rc = 0;
    while (not_datastream_.empty() && (rc = xmlTextReaderRead(reader->get())) == 1) {
      if (xmlTextReaderNodeType(reader->get()) == XML_READER_TYPE_ELEMENT) Element(reader->get());
    }
    if (!not_datastream_.empty()) {
      return Status::DataLoss(fmt::format("{}: not a SCAP source datastream ({})", path_, not_datastream_));
    }
    TEMPER_RETURN_IF_ERROR(reader->WellFormed(rc));
    if (!saw_root_) return Status::DataLoss(fmt::format("{}: holds no XML element", path_));
    for (const PendingHref& h : hrefs_) {
      if (catalog_names_.count(h.href)) continue;
      Violation(h.line, fmt::format("{}: {} href \"{}\" names no component of the datastream (libopenscap would "
                                    "read that path or URL instead)",
                                    h.where, h.element, h.href));
    }
    if (violations_.empty()) return Status::OK();
    std::string listed;
    for (std::size_t i = 0; i < violations_.size() && i < kMaxListed; ++i) listed += "\n  " + violations_[i];
    if (violations_.size() > kMaxListed) listed += fmt::format("\n  ... and {} more", violations_.size() - kMaxListed);
    return Status::PermissionDenied(fmt::format(
        "{}: refused: temper runs only OVAL checks (OCIL questionnaires as manual) from inside the datastream; "
        "{} violation(s):{}",
        path_, violations_.size(), listed));
  }

 private:
  void Violation(int line, std::string what) { violations_.push_back(fmt::format("line {}: {}", line, what)); }

  // Where an element sits, for messages: the innermost rule, CPE item, platform or component.
  std::string Where() const {
    for (auto it = context_.rbegin(); it != context_.rend(); ++it) {
      if (!it->empty()) return *it;
    }
    return "outside any rule";
  }

  void Element(xmlTextReaderPtr r) {
    const int depth = xmlTextReaderDepth(r);
    // The element's own line: the reader's parser position may already be further on.
    const int line = static_cast<int>(xmlGetLineNo(xmlTextReaderCurrentNode(r)));
    const std::string_view ns = XmlView(xmlTextReaderConstNamespaceUri(r));
    const std::string_view name = XmlView(xmlTextReaderConstLocalName(r));
    context_.resize(static_cast<std::size_t>(depth) + 1);
    context_[depth].clear();
    if (!saw_root_) {
      saw_root_ = true;
      if (ns != kDsNs || name != "data-stream-collection") {
        not_datastream_ = fmt::format("the document is <{}> ({})", name, ns.empty() ? "no namespace" : ns);
        return;
      }
    }
    const bool xccdf = IsXccdfNamespace(ns);
    if (xccdf && name == "Rule") {
      context_[depth] = "rule " + Attribute(r, "id");
    } else if (xccdf && name == "check") {
      std::string system = Attribute(r, "system");
      if (system != kOvalCheckSystem && system != kOcilCheckSystem && system != kOcilCheckSystem20) {
        Violation(line, fmt::format("{} checks with system \"{}\"{}", Where(), system,
                                    system == kSceSystem ? " (SCE: runs a script the datastream carries)" : ""));
      }
    } else if (xccdf && name == "check-content-ref") {
      hrefs_.push_back({line, Where(), "check-content-ref", Attribute(r, "href")});
    } else if (ns == kCpeDictNs && name == "cpe-item") {
      context_[depth] = "CPE item " + Attribute(r, "name");
    } else if (ns == kCpeDictNs && name == "check") {
      hrefs_.push_back({line, Where(), "CPE check", Attribute(r, "href")});
    } else if (ns == kCpeLangNs && name == "platform") {
      context_[depth] = "platform " + Attribute(r, "id");
    } else if (ns == kCpeLangNs && name == "check-fact-ref") {
      hrefs_.push_back({line, Where(), "CPE check-fact-ref", Attribute(r, "href")});
    } else if (ns == kDsNs && (name == "component" || name == "extended-component")) {
      context_[depth] = "component " + Attribute(r, "id");
    } else if (ns == kDsNs && name == "component-ref") {
      std::string href = Attribute(r, "href", kXlinkNs);
      if (!href.starts_with('#')) {
        Violation(line, fmt::format("component-ref {} points outside the datastream (xlink:href \"{}\")",
                                    Attribute(r, "id"), href));
      }
    } else if (ns == kCatalogNs && name == "uri") {
      std::string uri = Attribute(r, "uri");
      if (!uri.starts_with('#')) {
        Violation(line, fmt::format("catalog entry \"{}\" points outside the datastream (uri \"{}\")",
                                    Attribute(r, "name"), uri));
      }
      catalog_names_.insert(Attribute(r, "name"));
    }
  }

  const std::string& path_;
  bool saw_root_ = false;
  std::string not_datastream_;        // why the root element is not a datastream's, once seen
  std::vector<std::string> context_;  // per element depth: what the element at that depth names
  std::set<std::string> catalog_names_;
  std::vector<PendingHref> hrefs_;
  std::vector<std::string> violations_;
};

}  // namespace

Status CheckContentPolicy(const std::string& path) { return PolicyScan(path).Run(); }

}  // namespace temper::stig
