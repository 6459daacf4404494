"""A generic grpcio client against temperd, with no local copy of any .proto: everything it calls it
learns from server reflection v1, as grpcurl or a user's script would.

Usage: grpc_reflection_client.py SOCKET SUBMIT_JSON

SOCKET is temperd's unix socket; SUBMIT_JSON a temper.v1.SubmitBatchRequest in protobuf's JSON form.
Run by tests/orchestrator/server/daemon_reflection_test.cpp against a real temperd without models:
the batch it submits stays queued, so the client cancels it, as a user would, and the journal then
ends it. Prints what it found, one line per step; the first failure raises, so the exit status is
non-zero and the traceback names it.
"""

import json
import sys

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool, json_format, message_factory
from grpc_reflection.v1alpha import reflection_pb2
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import ProtoReflectionDescriptorDatabase

# grpcio-reflection (1.85.1) ships the v1alpha messages only. v1 has the same messages and field
# numbers under another package name, which the wire does not carry: the v1alpha classes encode v1
# requests and decode v1 responses exactly.
REFLECTION_V1 = "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo"
EXPECTED_SERVICES = {
    "temper.v1.Temper",
    "grpc.health.v1.Health",
    "grpc.reflection.v1.ServerReflection",
    "grpc.reflection.v1alpha.ServerReflection",
}
BATCH_ENDS = {"batch.completed", "batch.failed", "batch.cancelled"}

socket_path, submit_json = sys.argv[1:3]
channel = grpc.insecure_channel("unix:" + socket_path)
reflect = channel.stream_stream(
    REFLECTION_V1,
    request_serializer=reflection_pb2.ServerReflectionRequest.SerializeToString,
    response_deserializer=reflection_pb2.ServerReflectionResponse.FromString,
)


def ask_v1(**request):
    (response,) = list(reflect(iter([reflection_pb2.ServerReflectionRequest(**request)]), timeout=10))
    if response.HasField("error_response"):
        raise RuntimeError(f"reflection v1 {request}: {response.error_response.error_message}")
    return response


# Discover: the services, then each one's file with everything it imports, into a pool of our own.
services = sorted(s.name for s in ask_v1(list_services="").list_services_response.service)
print("reflection v1 services:", " ".join(services))
missing = EXPECTED_SERVICES - set(services)
assert not missing, f"reflection v1 does not list {sorted(missing)}"

files = {}
for service in services:
    for blob in ask_v1(file_containing_symbol=service).file_descriptor_response.file_descriptor_proto:
        proto = descriptor_pb2.FileDescriptorProto.FromString(blob)
        files[proto.name] = proto
pool = descriptor_pool.DescriptorPool()
added = set()


def add_file(name):
    if name in added:
        return
    for dependency in files[name].dependency:
        add_file(dependency)
    pool.Add(files[name])
    added.add(name)


for name in sorted(files):
    add_file(name)
print("reflected files:", " ".join(sorted(files)))


def method(full_service, name):
    """A callable for one method, with its message classes, all from the reflected descriptors."""
    m = pool.FindServiceByName(full_service).methods_by_name[name]
    request = message_factory.GetMessageClass(m.input_type)
    response = message_factory.GetMessageClass(m.output_type)
    kind = channel.unary_stream if m.server_streaming else channel.unary_unary
    call = kind(f"/{full_service}/{name}", request_serializer=request.SerializeToString,
                response_deserializer=response.FromString)
    return call, request


def enum_name(message, field):
    return message.DESCRIPTOR.fields_by_name[field].enum_type.values_by_number[getattr(message, field)].name


# Submit a batch.
submit, SubmitBatchRequest = method("temper.v1.Temper", "SubmitBatch")
batch = submit(json_format.ParseDict(json.loads(submit_json), SubmitBatchRequest()), timeout=10)
print(f"submitted batch {batch.id}: {enum_name(batch, 'state')}, {len(batch.rules)} rules")

# Follow its journal to its end. Without models it stays queued: once the journal shows it stored,
# cancel it, and read on until the event that ends it.
watch, WatchJournalRequest = method("temper.v1.Temper", "WatchJournal")
cancel, CancelBatchRequest = method("temper.v1.Temper", "CancelBatch")
events = watch(WatchJournalRequest(batch_id=batch.id, follow=True), timeout=30)
end = None
for event in events:
    print(f"journal: {event.seq} {event.type}")
    if event.type == "batch.submitted":
        cancel(CancelBatchRequest(batch_id=batch.id), timeout=10)
    if event.type in BATCH_ENDS:
        end = event.type
        events.cancel()
        break
assert end, "the journal stream ended before the batch did"

# Read its report: parts merge into one BatchReport; a run of fragments is one part's bytes.
report_call, GetBatchReportRequest = method("temper.v1.Temper", "GetBatchReport")
Report = message_factory.GetMessageClass(pool.FindMessageTypeByName("temper.v1.BatchReport"))
report, pending, chunks = Report(), b"", 0
for chunk in report_call(GetBatchReportRequest(batch_id=batch.id), timeout=30):
    chunks += 1
    if chunk.HasField("part"):
        report.MergeFrom(chunk.part)
    else:
        assert chunk.fragment.offset == len(pending), "a fragment out of order"
        pending += chunk.fragment.data
        if len(pending) == chunk.fragment.total_bytes:
            report.MergeFromString(pending)
            pending = b""
assert not pending, "the report ended inside a fragmented part"
print(f"report: batch {report.batch.id} {enum_name(report.batch, 'state')}, {len(report.batch.rules)} rules, "
      f"{chunks} chunks")

# Health, from its reflected descriptors too.
check, HealthCheckRequest = method("grpc.health.v1.Health", "Check")
for service in ("", "temper.v1.Temper"):
    print(f"health {service!r}: {enum_name(check(HealthCheckRequest(service=service), timeout=10), 'status')}")

# v1alpha, through grpcio-reflection's own client, still answers the same, health included.
v1alpha = ProtoReflectionDescriptorDatabase(channel)
alpha_services = sorted(v1alpha.get_services())
print("reflection v1alpha services:", " ".join(alpha_services))
assert alpha_services == services, "v1alpha lists other services than v1"
health = descriptor_pool.DescriptorPool(v1alpha).FindServiceByName("grpc.health.v1.Health")
print("reflection v1alpha health methods:", " ".join(sorted(health.methods_by_name)))
