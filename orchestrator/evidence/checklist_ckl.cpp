#include "orchestrator/evidence/checklist_ckl.h"

#include <memory>
#include <vector>

#include <fmt/format.h>

#include "orchestrator/evidence/markup_escape.h"
#include "stig/scap/xml_nodes.h"

namespace temper::evidence {
namespace {

// ---- writing ----

void Element(std::string& out, int depth, std::string_view name, std::string_view text) {
  out.append(static_cast<size_t>(depth), '\t');
  out += fmt::format("<{0}>{1}</{0}>\n", name, MarkupEscape(text));
}

void Open(std::string& out, int depth, std::string_view name) {
  out.append(static_cast<size_t>(depth), '\t');
  out += fmt::format("<{}>\n", name);
}

void Close(std::string& out, int depth, std::string_view name) {
  out.append(static_cast<size_t>(depth), '\t');
  out += fmt::format("</{}>\n", name);
}

// ---- reading ----

using stig::xml::Child;
using stig::xml::Children;
using stig::xml::CtxtFree;
using stig::xml::DocFree;
using stig::xml::Name;
using stig::xml::Text;

std::string ChildText(const xmlNode* n, std::string_view name) { return Text(Child(n, name)); }

}  // namespace

std::string WriteCkl(const Checklist& c) {
  std::string out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<!--temper: STIG remediation evidence-->\n";
  Open(out, 0, "CHECKLIST");
  Open(out, 1, "ASSET");
  const ChecklistAsset& a = c.asset;
  Element(out, 2, "ROLE", a.role);
  Element(out, 2, "ASSET_TYPE", a.asset_type);
  if (!a.marking.empty()) Element(out, 2, "MARKING", a.marking);
  Element(out, 2, "HOST_NAME", a.host_name);
  Element(out, 2, "HOST_IP", a.host_ip);
  Element(out, 2, "HOST_MAC", a.host_mac);
  Element(out, 2, "HOST_FQDN", a.host_fqdn);
  Element(out, 2, "TARGET_COMMENT", a.target_comment);
  Element(out, 2, "TECH_AREA", a.tech_area);
  Element(out, 2, "TARGET_KEY", a.target_key);
  Element(out, 2, "WEB_OR_DATABASE", a.web_or_database ? "true" : "false");
  Element(out, 2, "WEB_DB_SITE", a.web_db_site);
  Element(out, 2, "WEB_DB_INSTANCE", a.web_db_instance);
  Close(out, 1, "ASSET");
  Open(out, 1, "STIGS");
  for (const ChecklistStig& stig : c.stigs) {
    Open(out, 2, "iSTIG");
    Open(out, 3, "STIG_INFO");
    for (const auto& [name, value] : stig.info) {
      Open(out, 4, "SI_DATA");
      Element(out, 5, "SID_NAME", name);
      if (!value.empty()) Element(out, 5, "SID_DATA", value);
      Close(out, 4, "SI_DATA");
    }
    Close(out, 3, "STIG_INFO");
    for (const ChecklistVuln& v : stig.vulns) {
      Open(out, 3, "VULN");
      for (const auto& [name, value] : v.data) {
        Open(out, 4, "STIG_DATA");
        Element(out, 5, "VULN_ATTRIBUTE", name);
        Element(out, 5, "ATTRIBUTE_DATA", value);
        Close(out, 4, "STIG_DATA");
      }
      Element(out, 4, "STATUS", CklStatusName(v.status));
      Element(out, 4, "FINDING_DETAILS", v.finding_details);
      Element(out, 4, "COMMENTS", v.comments);
      Element(out, 4, "SEVERITY_OVERRIDE", v.severity_override);
      Element(out, 4, "SEVERITY_JUSTIFICATION", v.severity_justification);
      Close(out, 3, "VULN");
    }
    Close(out, 2, "iSTIG");
  }
  Close(out, 1, "STIGS");
  Close(out, 0, "CHECKLIST");
  return out;
}

Result<Checklist> ReadCkl(std::string_view xml, const std::string& source) {
  if (xml.size() > static_cast<size_t>(INT32_MAX)) return Status::DataLoss(source + ": larger than 2 GiB");
  std::unique_ptr<xmlParserCtxt, CtxtFree> ctxt(xmlNewParserCtxt());
  if (!ctxt) return Status::ResourceExhausted("libxml2 could not allocate a parser context");
  std::unique_ptr<xmlDoc, DocFree> doc(xmlCtxtReadMemory(ctxt.get(), xml.data(), static_cast<int>(xml.size()),
                                                         source.c_str(), nullptr,
                                                         XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING));
  if (!doc) {
    const xmlError* e = xmlCtxtGetLastError(ctxt.get());
    return Status::DataLoss(fmt::format("{}:{}: not well-formed XML: {}", source, e ? e->line : 0,
                                        e && e->message ? std::string(e->message) : "unknown error"));
  }
  const xmlNode* root = xmlDocGetRootElement(doc.get());
  if (!root || Name(root) != "CHECKLIST") return Status::DataLoss(source + ": the root element is not CHECKLIST");
  Checklist c;
  if (const xmlNode* a = Child(root, "ASSET")) {
    c.asset.role = ChildText(a, "ROLE");
    c.asset.asset_type = ChildText(a, "ASSET_TYPE");
    c.asset.marking = ChildText(a, "MARKING");
    c.asset.host_name = ChildText(a, "HOST_NAME");
    c.asset.host_ip = ChildText(a, "HOST_IP");
    c.asset.host_mac = ChildText(a, "HOST_MAC");
    c.asset.host_fqdn = ChildText(a, "HOST_FQDN");
    c.asset.target_comment = ChildText(a, "TARGET_COMMENT");
    c.asset.tech_area = ChildText(a, "TECH_AREA");
    c.asset.target_key = ChildText(a, "TARGET_KEY");
    c.asset.web_or_database = ChildText(a, "WEB_OR_DATABASE") == "true";
    c.asset.web_db_site = ChildText(a, "WEB_DB_SITE");
    c.asset.web_db_instance = ChildText(a, "WEB_DB_INSTANCE");
  }
  for (const xmlNode* s : Children(Child(root, "STIGS"))) {
    if (Name(s) != "iSTIG") continue;
    ChecklistStig stig;
    for (const xmlNode* si : Children(Child(s, "STIG_INFO"))) {
      if (Name(si) == "SI_DATA") stig.info.emplace_back(ChildText(si, "SID_NAME"), ChildText(si, "SID_DATA"));
    }
    for (const xmlNode* vn : Children(s)) {
      if (Name(vn) != "VULN") continue;
      ChecklistVuln v;
      for (const xmlNode* d : Children(vn)) {
        if (Name(d) == "STIG_DATA") v.data.emplace_back(ChildText(d, "VULN_ATTRIBUTE"), ChildText(d, "ATTRIBUTE_DATA"));
      }
      Result<ChecklistStatus> status = ParseCklStatus(ChildText(vn, "STATUS"));
      if (!status.ok()) {
        return Status::DataLoss(fmt::format("{}:{}: VULN {}: STATUS {}", source, xmlGetLineNo(vn),
                                            AttributeOf(v.data, "Vuln_Num"), status.status().message()));
      }
      v.status = *status;
      v.finding_details = ChildText(vn, "FINDING_DETAILS");
      v.comments = ChildText(vn, "COMMENTS");
      v.severity_override = ChildText(vn, "SEVERITY_OVERRIDE");
      v.severity_justification = ChildText(vn, "SEVERITY_JUSTIFICATION");
      stig.vulns.push_back(std::move(v));
    }
    c.stigs.push_back(std::move(stig));
  }
  return c;
}

}  // namespace temper::evidence
