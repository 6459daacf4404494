// The checks and the page reservation every backend does before a forward pass touches any state
// (Backend::Forward's contract): each item a live sequence, once; at least one token, every one
// inside the vocabulary; the sequence within the context limit; then the KV blocks reserved. And
// the checks of a drafting call (Backend::Draft's contract).
//
// Thread safety: as the pager (the backend's one driving thread).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "common/status.h"
#include "engine/backend.h"
#include "engine/kv_cache.h"

namespace temper::engine {

// NotFound, InvalidArgument or OutOfRange naming the item, as Backend::Forward documents, before
// anything is reserved; then ResourceExhausted when the pool cannot hold the batch (the blocks
// taken so far stay with their sequences, as KvPager::Reserve leaves them).
Status ReserveForwardBatch(std::span<const ForwardItem> batch, KvPager& pager, int vocab_size, int64_t max_context);

// The sequence and position a logit row of a backend's last Forward was computed at: Draft starts
// from that row's hidden state.
struct LogitRowPosition {
  SequenceId seq = -1;
  int64_t pos = 0;
};

// Backend::Draft's checks, as it documents them, against `last_rows` (the last Forward's logit rows
// whose hidden states the backend still holds). Each request's drafter position (its sequence's
// length), or -1 for a sequence at `max_context`, which gets no drafts.
Result<std::vector<int64_t>> CheckDraftRequests(std::span<const DraftRequest> requests, const KvPager& pager,
                                                int vocab_size, int64_t max_context,
                                                std::span<const LogitRowPosition> last_rows);

}  // namespace temper::engine
