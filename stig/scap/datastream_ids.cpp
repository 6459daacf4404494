#include "stig/scap/datastream_ids.h"

#include <string_view>

#include <fmt/format.h>

#include "stig/scap/scap_namespaces.h"
#include "stig/scap/xml_reader.h"

namespace temper::stig {
namespace {

constexpr std::string_view kDsNs = "http://scap.nist.gov/schema/scap/source/1.2";

}  // namespace

Result<DatastreamIds> ReadDatastreamIds(const std::string& path) {
  TEMPER_ASSIGN_OR_RETURN(std::unique_ptr<XmlFileReader> reader, XmlFileReader::Open(path));
  DatastreamIds out;
  bool root = true;
  int rc = 0;
  while ((rc = xmlTextReaderRead(reader->get())) == 1) {
    if (xmlTextReaderNodeType(reader->get()) != XML_READER_TYPE_ELEMENT) continue;
    const std::string_view ns = XmlView(xmlTextReaderConstNamespaceUri(reader->get()));
    const std::string_view name = XmlView(xmlTextReaderConstLocalName(reader->get()));
    if (root) {
      if (ns != kDsNs || name != "data-stream-collection") {
        return Status::DataLoss(fmt::format("{}: not a SCAP source datastream (the document is <{}>)", path, name));
      }
      root = false;
    }
    if (!IsXccdfNamespace(ns) || (name != "Rule" && name != "Profile")) continue;
    xmlChar* id = xmlTextReaderGetAttribute(reader->get(), BAD_CAST "id");
    if (id != nullptr) (name == "Rule" ? out.rules : out.profiles).insert(std::string(XmlView(id)));
    xmlFree(id);
  }
  TEMPER_RETURN_IF_ERROR(reader->WellFormed(rc));
  if (out.rules.empty()) return Status::DataLoss(fmt::format("{}: the datastream defines no XCCDF rule", path));
  return out;
}

}  // namespace temper::stig
