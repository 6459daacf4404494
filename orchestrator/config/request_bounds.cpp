#include "orchestrator/config/request_bounds.h"

#include <map>
#include <string>

#include <fmt/format.h>

#include "orchestrator/config/waivers.h"

namespace temper {

namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

// Fields that are not identifiers or names, by full name. Each bound is what the field's use needs.
const std::map<std::string, size_t>& Table() {
  static const std::map<std::string, size_t> table = {
      {"temper.v1.SubmitBatchRequest.datastream", 4096},  // a path: PATH_MAX
      {"temper.v1.SubmitBatchRequest.name", 200},
      {"temper.v1.SubmitBatchRequest.request_id", 128},
      {"temper.v1.SubmitBatchRequest.host", 512},  // user@name:port
      {"temper.v1.AcceptHostKeyRequest.host", 512},
      {"temper.v1.Waiver.reason", kMaxWaiverReason},
      {"temper.v1.Waiver.owner", kMaxWaiverOwner},
      {"temper.v1.CancelBatchRequest.reason", 1000},
      {"temper.v1.RetireFixRequest.reason", 1000},
      {"temper.v1.ConfirmRebootRequest.note", 2000},
      // A DISA STIG file, within gRPC's 4 MiB message; bigger ones go in temperd's disa_stigs: directory.
      {"temper.v1.ExportBatchRequest.disa_stig", kMaxDisaStigUploadBytes},
  };
  return table;
}

Status Check(const Message& m, const std::string& prefix) {
  const Reflection* r = m.GetReflection();
  std::vector<const FieldDescriptor*> fields;
  r->ListFields(m, &fields);  // only the fields that are set
  for (const FieldDescriptor* f : fields) {
    const bool text = f->type() == FieldDescriptor::TYPE_STRING || f->type() == FieldDescriptor::TYPE_BYTES;
    if (!text && f->type() != FieldDescriptor::TYPE_MESSAGE) continue;
    const int count = f->is_repeated() ? r->FieldSize(m, f) : 1;
    for (int i = 0; i < count; ++i) {
      std::string path = f->is_repeated() ? fmt::format("{}{}[{}]", prefix, f->name(), i) : prefix + f->name();
      if (!text) {
        const Message& sub = f->is_repeated() ? r->GetRepeatedMessage(m, f, i) : r->GetMessage(m, f);
        TEMPER_RETURN_IF_ERROR(Check(sub, path + "."));
        continue;
      }
      std::string scratch;
      const std::string& value =
          f->is_repeated() ? r->GetRepeatedStringReference(m, f, i, &scratch) : r->GetStringReference(m, f, &scratch);
      TEMPER_RETURN_IF_ERROR(CheckStringBound(path, *f, value));
    }
  }
  return Status::OK();
}

}  // namespace

size_t StringFieldBound(const FieldDescriptor& field) {
  auto it = Table().find(field.full_name());
  return it == Table().end() ? kMaxIdentifierBytes : it->second;
}

Status CheckStringBound(std::string_view path, const FieldDescriptor& field, std::string_view value) {
  const size_t bound = StringFieldBound(field);
  if (value.size() > bound) {
    return Status::InvalidArgument(fmt::format("{}: {} bytes; at most {}", path, value.size(), bound));
  }
  return Status::OK();
}

Status CheckRequestBounds(const Message& request) { return Check(request, ""); }

}  // namespace temper
