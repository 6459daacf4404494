#include "stig/scap/xml_reader.h"

#include <sys/stat.h>

#include <cerrno>

#include <fmt/format.h>

namespace temper::stig {

Result<std::unique_ptr<XmlFileReader>> XmlFileReader::Open(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return Status::NotFound(fmt::format("datastream {} does not exist", path));
    return Status::FromErrno(errno, "reading " + path);
  }
  xmlTextReaderPtr reader = xmlReaderForFile(path.c_str(), nullptr, XML_PARSE_NONET);
  if (reader == nullptr) return Status::DataLoss(fmt::format("{}: cannot open it as XML", path));
  std::unique_ptr<XmlFileReader> out(new XmlFileReader(path, reader));
  xmlTextReaderSetStructuredErrorHandler(reader, RecordFirstError, out.get());
  return out;
}

XmlFileReader::XmlFileReader(std::string path, xmlTextReaderPtr reader) : path_(std::move(path)), reader_(reader) {}

XmlFileReader::~XmlFileReader() { xmlFreeTextReader(reader_); }

// Warnings do not make a document malformed; the first error is the one worth naming.
void XmlFileReader::RecordFirstError(void* self, xmlErrorPtr error) {
  std::string& out = static_cast<XmlFileReader*>(self)->first_error_;
  if (!out.empty() || !error || error->level < XML_ERR_ERROR) return;
  std::string message = error->message ? error->message : "malformed XML";
  while (!message.empty() && message.back() == '\n') message.pop_back();
  out = fmt::format("line {}: {}", error->line, message);
}

Status XmlFileReader::WellFormed(int rc) const {
  if (rc == 0 && first_error_.empty()) return Status::OK();
  return Status::DataLoss(
      fmt::format("{}: not well-formed XML: {}", path_, first_error_.empty() ? "the reader stopped" : first_error_));
}

}  // namespace temper::stig
