// The checks and the page reservation every backend does before a forward pass touches any state
// (Backend::Forward's contract): each item a live sequence, once; at least one token, every one
// inside the vocabulary; the sequence within the context limit; then the KV blocks reserved.
//
// Thread safety: as the pager (the backend's one driving thread).
#pragma once

#include <cstdint>
#include <span>

#include "common/status.h"
#include "engine/backend.h"
#include "engine/kv_cache.h"

namespace temper::engine {

// NotFound, InvalidArgument or OutOfRange naming the item, as Backend::Forward documents, before
// anything is reserved; then ResourceExhausted when the pool cannot hold the batch (the blocks
// taken so far stay with their sequences, as KvPager::Reserve leaves them).
Status ReserveForwardBatch(std::span<const ForwardItem> batch, KvPager& pager, int vocab_size, int64_t max_context);

}  // namespace temper::engine
