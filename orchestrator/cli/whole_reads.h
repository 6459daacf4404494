// Whole reads: the answers temperd sends in pieces, put back together for the CLI's commands.
//
// No message temperd sends is over about 1 MiB (message_chunks.h), so what grows with a batch comes
// in pieces: a report as a stream of chunks, a batch's rules and the host list in pages. The
// commands print whole answers, so these read every piece and return the message a single answer
// would have been; what they return renders exactly as before the answers were cut (issue 22).
//
// Errors: the call's own (Connection::Explain), or DataLoss when the pieces do not fit together.
#pragma once

#include <string>

#include "common/status.h"
#include "orchestrator/cli/connection.h"
#include "temper/v1/temper.pb.h"

namespace temper::cli {

// GetBatchReport's chunks, merged into the whole BatchReport.
Result<temper::v1::BatchReport> ReadBatchReport(Connection& conn, const std::string& batch_id);

// GetBatch, with every page of the batch's rules.
Result<temper::v1::Batch> ReadBatch(Connection& conn, const std::string& batch_id);

// The rules that did not fit in `batch` (an answer whose next_rules_page_token is set), fetched and
// appended; the batch's other fields are left as they came.
Status ReadRemainingRules(Connection& conn, temper::v1::Batch& batch);

// ListHosts, every page.
Result<temper::v1::ListHostsResponse> ReadHosts(Connection& conn);

}  // namespace temper::cli
