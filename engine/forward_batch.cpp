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

}  // namespace temper::engine
