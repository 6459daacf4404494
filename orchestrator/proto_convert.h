// Conversions between the state store's records and the temper.v1 wire messages, and from
// temper::Status to grpc::Status. The only place that knows both shapes.
#pragma once

#include <grpcpp/support/status.h>

#include "common/status.h"
#include "orchestrator/records.h"
#include "temper/v1/temper.pb.h"

namespace temper {

// With the batch's rules and waivers as the record holds them (none when it was loaded without).
void ToProto(const BatchRecord& batch, temper::v1::Batch* out);
void ToProto(const BatchRuleRecord& rule, temper::v1::BatchRule* out);
void ToProto(const EventRecord& event, temper::v1::JournalEvent* out);
void ToProto(const LessonRecord& lesson, temper::v1::Lesson* out);
void ToProto(const RoleUsageRecord& usage, temper::v1::RoleUsage* out);
void ToProto(const AttemptRecord& attempt, temper::v1::Attempt* out);
void ToProto(const FixpointPass& pass, temper::v1::FixpointPass* out);
void ToProto(const Waiver& waiver, temper::v1::Waiver* out);

temper::v1::BatchState ToProto(BatchState state);
temper::v1::RuleState ToProto(RuleState state);
// nullopt for BATCH_STATE_UNSPECIFIED and unknown numbers.
std::optional<BatchState> FromProto(temper::v1::BatchState state);

grpc::Status ToGrpcStatus(const Status& status);

}  // namespace temper
