#include "engine/forward_batch.h"

#include <set>

#include <fmt/format.h>

namespace temper::engine {

Status ReserveForwardBatch(std::span<const ForwardItem> batch, KvPager& pager, int vocab_size, int64_t max_context) {
  std::set<SequenceId> seen;
  for (size_t i = 0; i < batch.size(); ++i) {
    const ForwardItem& item = batch[i];
    if (!pager.Live(item.seq))
      return Status::NotFound(fmt::format("batch item {}: sequence {} is not live", i, item.seq));
    if (!seen.insert(item.seq).second) {
      return Status::InvalidArgument(fmt::format("batch item {}: sequence {} appears twice", i, item.seq));
    }
    if (item.tokens.empty()) return Status::InvalidArgument(fmt::format("batch item {}: no tokens", i));
    for (size_t t = 0; t < item.tokens.size(); ++t) {
      if (item.tokens[t] < 0 || item.tokens[t] >= vocab_size) {
        return Status::InvalidArgument(fmt::format("batch item {}: token {} is id {}, outside the vocabulary [0, {})",
                                                   i, t, item.tokens[t], vocab_size));
      }
    }
    const int64_t end = pager.Length(item.seq) + static_cast<int64_t>(item.tokens.size());
    if (end > max_context) {
      return Status::OutOfRange(
          fmt::format("batch item {}: sequence {} would reach {} tokens, past the context limit {}", i, item.seq, end,
                      max_context));
    }
  }
  for (const ForwardItem& item : batch) {
    TEMPER_RETURN_IF_ERROR(pager.Reserve(item.seq, pager.Length(item.seq) + static_cast<int64_t>(item.tokens.size())));
  }
  return Status::OK();
}

Result<std::vector<int64_t>> CheckDraftRequests(std::span<const DraftRequest> requests, const KvPager& pager,
                                                int vocab_size, int64_t max_context,
                                                std::span<const LogitRowPosition> last_rows) {
  std::set<SequenceId> seen;
  std::vector<int64_t> positions;
  for (const DraftRequest& q : requests) {
    TEMPER_ASSIGN_OR_RETURN(const int64_t length, pager.LiveLength(q.seq));
    if (!seen.insert(q.seq).second) {
      return Status::InvalidArgument(fmt::format("Draft: sequence {} is asked for twice", q.seq));
    }
    if (q.count < 1 || q.count > kMaxDraftTokens) {
      return Status::InvalidArgument(
          fmt::format("Draft: sequence {} asks for {} drafts, must be in [1, {}]", q.seq, q.count, kMaxDraftTokens));
    }
    if (q.token < 0 || q.token >= vocab_size) {
      return Status::InvalidArgument(
          fmt::format("Draft: sequence {}'s token {} is outside the vocabulary of {}", q.seq, q.token, vocab_size));
    }
    const bool row_ok = q.hidden_row >= 0 && q.hidden_row < static_cast<int64_t>(last_rows.size()) &&
                        last_rows[q.hidden_row].seq == q.seq && last_rows[q.hidden_row].pos == length - 1;
    if (!row_ok) {
      return Status::FailedPrecondition(
          fmt::format("Draft: row {} of the last forward pass is not sequence {}'s last position ({})", q.hidden_row,
                      q.seq, length - 1));
    }
    positions.push_back(length < max_context ? length : -1);
  }
  return positions;
}

}  // namespace temper::engine
