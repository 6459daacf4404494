// Decode graph buckets: which captured CUDA graph serves a decode batch of a given size.
//
// A graph replays fixed kernel launches over fixed buffers, so one is captured per batch size in a
// small set (1, 2, 4, 8, ... up to max_batch, max_batch itself always included); a batch runs the
// smallest bucket that holds it, its unused rows padded with a dummy row that writes nothing to the
// cache. Batches larger than every bucket, and prefill, run eagerly.
//
// Pure host logic, unit-tested everywhere. Thread safety: values only.
#pragma once

#include <vector>

namespace temper::engine::cuda {

// The bucket sizes for `max_batch` (>= 1), ascending: powers of two below it, then max_batch.
std::vector<int> GraphBuckets(int max_batch);

// Index into `buckets` of the smallest bucket >= batch, or -1 when none holds it (run eagerly).
int SelectGraphBucket(const std::vector<int>& buckets, int batch);

}  // namespace temper::engine::cuda
