// What temper's streaming passes over SCAP XML share (content_policy.cpp, datastream_ids.cpp):
// libxml2's text reader owned by a unique_ptr, its strings as views, and the first error it reports.
#pragma once

#include <libxml/xmlreader.h>

#include <memory>
#include <string>
#include <string_view>

#include <fmt/format.h>

namespace temper::stig {

inline std::string_view XmlView(const xmlChar* s) {
  return s ? std::string_view(reinterpret_cast<const char*>(s)) : "";
}

struct XmlReaderDeleter {
  void operator()(xmlTextReader* r) const { xmlFreeTextReader(r); }
};
using XmlReader = std::unique_ptr<xmlTextReader, XmlReaderDeleter>;

// A structured error handler for xmlTextReaderSetStructuredErrorHandler: keeps the first error
// libxml2 reports, with its line, in the std::string `arg` points to (warnings do not make a
// document malformed).
inline void RecordFirstXmlError(void* arg, xmlErrorPtr error) {
  auto* out = static_cast<std::string*>(arg);
  if (!out->empty() || !error || error->level < XML_ERR_ERROR) return;
  std::string message = error->message ? error->message : "malformed XML";
  while (!message.empty() && message.back() == '\n') message.pop_back();
  *out = fmt::format("line {}: {}", error->line, message);
}

}  // namespace temper::stig
