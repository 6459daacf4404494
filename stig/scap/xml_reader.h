// XmlFileReader: what temper's streaming passes over a SCAP file share (content_policy.cpp,
// datastream_ids.cpp): libxml2's text reader over the file, without network access, keeping the
// first error libxml2 reports, and the verdict on whether the document was well-formed once
// reading stopped. XmlView reads libxml2's strings as views.
//
// Thread safety: one reader per thread.
#pragma once

#include <libxml/xmlreader.h>

#include <memory>
#include <string>
#include <string_view>

#include "common/status.h"

namespace temper::stig {

inline std::string_view XmlView(const xmlChar* s) {
  return s ? std::string_view(reinterpret_cast<const char*>(s)) : "";
}

class XmlFileReader {
 public:
  // NotFound when `path` does not exist ("datastream PATH does not exist"); DataLoss when libxml2
  // cannot open it as XML; other errors as stat(2) gives them.
  static Result<std::unique_ptr<XmlFileReader>> Open(const std::string& path);
  ~XmlFileReader();
  XmlFileReader(const XmlFileReader&) = delete;
  XmlFileReader& operator=(const XmlFileReader&) = delete;

  xmlTextReaderPtr get() const { return reader_; }
  // After the last xmlTextReaderRead returned `rc`: DataLoss naming the file and the first error
  // ("PATH: not well-formed XML: line 3: ...") when the document was not well-formed, else OK.
  Status WellFormed(int rc) const;

 private:
  XmlFileReader(std::string path, xmlTextReaderPtr reader);
  static void RecordFirstError(void* self, xmlErrorPtr error);

  const std::string path_;
  xmlTextReaderPtr reader_;
  std::string first_error_;
};

}  // namespace temper::stig
