#include "orchestrator/cli/whole_reads.h"

#include <fmt/format.h>

#include "orchestrator/message_chunks.h"

namespace temper::cli {

Result<temper::v1::BatchReport> ReadBatchReport(Connection& conn, const std::string& batch_id) {
  temper::v1::GetBatchReportRequest request;
  request.set_batch_id(batch_id);
  // A report may be tens of megabytes: like an export, it has no deadline and ends when it is whole.
  auto context = conn.NewContext(/*with_deadline=*/false);
  auto reader = conn.stub().GetBatchReport(context.get(), request);
  ChunkAssembler<temper::v1::BatchReportChunk> report;
  temper::v1::BatchReportChunk chunk;
  Status assembled;
  while (assembled.ok() && reader->Read(&chunk)) assembled = report.Add(chunk);
  if (!assembled.ok()) {
    context->TryCancel();
    reader->Finish();
    return assembled;
  }
  grpc::Status status = reader->Finish();
  if (!status.ok()) return conn.Explain(status);
  return std::move(report).Finish();
}

Status ReadRemainingRules(Connection& conn, temper::v1::Batch& batch) {
  while (!batch.next_rules_page_token().empty()) {
    temper::v1::GetBatchRequest request;
    request.set_batch_id(batch.id());
    request.set_rules_page_token(batch.next_rules_page_token());
    temper::v1::Batch page;
    grpc::Status status = conn.stub().GetBatch(conn.NewContext().get(), request, &page);
    if (!status.ok()) return conn.Explain(status);
    if (page.rules().empty() && !page.next_rules_page_token().empty()) {
      return Status::DataLoss(fmt::format("batch {}: a page of its rules came empty", batch.id()));
    }
    for (temper::v1::BatchRule& r : *page.mutable_rules()) *batch.add_rules() = std::move(r);
    batch.set_next_rules_page_token(page.next_rules_page_token());
  }
  return Status::OK();
}

Result<temper::v1::Batch> ReadBatch(Connection& conn, const std::string& batch_id) {
  temper::v1::GetBatchRequest request;
  request.set_batch_id(batch_id);
  temper::v1::Batch batch;
  grpc::Status status = conn.stub().GetBatch(conn.NewContext().get(), request, &batch);
  if (!status.ok()) return conn.Explain(status);
  TEMPER_RETURN_IF_ERROR(ReadRemainingRules(conn, batch));
  return batch;
}

Result<temper::v1::ListHostsResponse> ReadHosts(Connection& conn) {
  temper::v1::ListHostsResponse all;
  temper::v1::ListHostsRequest request;
  do {
    temper::v1::ListHostsResponse page;
    grpc::Status status = conn.stub().ListHosts(conn.NewContext().get(), request, &page);
    if (!status.ok()) return conn.Explain(status);
    if (page.hosts().empty() && !page.next_page_token().empty()) {
      return Status::DataLoss("a page of the host list came empty");
    }
    for (temper::v1::Host& h : *page.mutable_hosts()) *all.add_hosts() = std::move(h);
    request.set_page_token(page.next_page_token());
  } while (!request.page_token().empty());
  return all;
}

}  // namespace temper::cli
