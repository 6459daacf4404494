#include "orchestrator/config/request_bounds.h"

#include <fmt/format.h>
#include <catch2/catch.hpp>

#include "orchestrator/config/batch_request.h"
#include "temper/v1/temper.pb.h"

namespace temper {
namespace {

size_t Bound(const google::protobuf::Descriptor* d, const std::string& field) {
  const google::protobuf::FieldDescriptor* f = d->FindFieldByName(field);
  REQUIRE(f != nullptr);
  return StringFieldBound(*f);
}

TEST_CASE("request bounds: free text, paths and addresses have their own bounds, everything else an identifier's") {
  using namespace temper::v1;
  CHECK(Bound(SubmitBatchRequest::descriptor(), "datastream") == 4096);
  CHECK(Bound(SubmitBatchRequest::descriptor(), "name") == 200);
  CHECK(Bound(SubmitBatchRequest::descriptor(), "request_id") == 128);
  CHECK(Bound(SubmitBatchRequest::descriptor(), "host") == 512);
  CHECK(Bound(AcceptHostKeyRequest::descriptor(), "host") == 512);
  CHECK(Bound(temper::v1::Waiver::descriptor(), "reason") == 2000);
  CHECK(Bound(temper::v1::Waiver::descriptor(), "owner") == 200);
  CHECK(Bound(CancelBatchRequest::descriptor(), "reason") == 1000);
  CHECK(Bound(ConfirmRebootRequest::descriptor(), "note") == 2000);
  CHECK(Bound(SubmitBatchRequest::descriptor(), "target") == kMaxIdentifierBytes);
  CHECK(Bound(SubmitBatchRequest::descriptor(), "rule_ids") == kMaxIdentifierBytes);
  CHECK(Bound(AcceptHostKeyRequest::descriptor(), "fingerprint") == kMaxIdentifierBytes);
  CHECK(Bound(ExportBatchRequest::descriptor(), "format") == kMaxIdentifierBytes);
}

TEST_CASE("request bounds: the first field over its bound is named by its path, without its value") {
  temper::v1::SubmitBatchRequest r;
  r.set_target("lab");
  r.add_rule_ids("a");
  r.add_rule_ids("b");
  r.add_waivers()->set_reason("fine");
  CHECK(CheckRequestBounds(r).ok());
  r.add_waivers()->set_reason(std::string(2001, 'w'));
  Status s = CheckRequestBounds(r);
  CHECK(s.code() == StatusCode::kInvalidArgument);
  CHECK(s.message() == "waivers[1].reason: 2001 bytes; at most 2000");
  r.mutable_waivers(1)->set_reason("fine");
  r.add_rule_ids(std::string(257, 'r'));
  CHECK(CheckRequestBounds(r).message() == "rule_ids[2]: 257 bytes; at most 256");
  r.mutable_rule_ids(2)->assign(256, 'r');
  CHECK(CheckRequestBounds(r).ok());
  r.set_datastream(std::string(4097, '/'));
  CHECK(CheckRequestBounds(r).message() == "datastream: 4097 bytes; at most 4096");
}

TEST_CASE("request bounds: the SubmitBatch validator refuses an oversized field before anything else") {
  temper::v1::SubmitBatchRequest r;
  r.set_name(std::string(201, 'n'));  // every other field missing: the bound comes first
  DaemonConfig config;
  Result<NewBatch> b = ValidateSubmit(DecodeSubmitRequest(r), SubmitContext{.config = config});
  REQUIRE_FALSE(b.ok());
  CHECK(b.status().message() == "name: 201 bytes; at most 200");
}

// SubmitBatch checks the decoded request, not the proto: a string field added to the proto (or to
// its waivers) but not decoded and bounded fails here, so every field stays bounded.
TEST_CASE("request bounds: every string field of SubmitBatchRequest is decoded and bounded by the validator") {
  DaemonConfig config;
  auto refused = [&](const temper::v1::SubmitBatchRequest& r) {
    Result<NewBatch> b = ValidateSubmit(DecodeSubmitRequest(r), SubmitContext{.config = config});
    return b.ok() ? std::string("OK") : b.status().message();
  };
  int checked = 0;
  for (const google::protobuf::Descriptor* message :
       {temper::v1::SubmitBatchRequest::descriptor(), temper::v1::Waiver::descriptor()}) {
    for (int i = 0; i < message->field_count(); ++i) {
      const google::protobuf::FieldDescriptor& field = *message->field(i);
      if (field.type() != google::protobuf::FieldDescriptor::TYPE_STRING) continue;
      const std::string over(StringFieldBound(field) + 1, 'x');
      temper::v1::SubmitBatchRequest r;
      google::protobuf::Message* holder = &r;
      std::string path;
      if (message == temper::v1::Waiver::descriptor()) {
        holder = r.add_waivers();
        path = "waivers[0].";
      }
      const google::protobuf::Reflection* reflection = holder->GetReflection();
      if (field.is_repeated()) {
        reflection->AddString(holder, &field, over);
        path += field.name() + "[0]";
      } else {
        reflection->SetString(holder, &field, over);
        path += field.name();
      }
      INFO(field.full_name());
      CHECK(refused(r) == fmt::format("{}: {} bytes; at most {}", path, over.size(), StringFieldBound(field)));
      ++checked;
    }
  }
  CHECK(checked == 10);  // target, datastream, profile, rule_ids, name, request_id, host; the waiver's three
}

}  // namespace
}  // namespace temper
