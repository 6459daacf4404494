// One sequence's attention inputs, for the test that holds the attention kernel to a model of its
// numerics (attention_kernel_test.cpp): a KV cache (a sliding ring, or full layers' paged blocks
// with the sequence's block table in reverse order, so the table matters), this pass's fresh keys
// from position p0 on, RoPE tables, and one padding row after the sequence's rows. Host copies first (a CPU model reads
// them), then the same on the device with the views a launch takes.
#pragma once

#include <cmath>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "engine/cuda/rank_ops.h"
#include "engine/cuda_test_support.h"

namespace temper::engine::cuda::testing {

struct AttentionCase {
  bool sliding;
  bool k_eq_v;
  int hd;
  int rows;     // this pass's rows of one sequence, at positions p0 .. p0 + rows - 1
  int64_t p0;   // keys before p0 are in the cache, from p0 on they are this pass's
  int q_heads;  // over kv_heads KV heads
  int kv_heads;
  int splits;
};

// The case in words, for a failing check's message.
inline std::string Describe(const AttentionCase& c) {
  std::ostringstream out;
  out << (c.sliding  ? "sliding"
          : c.k_eq_v ? "full, K from V"
                     : "full with K")
      << ", head_dim " << c.hd << ", " << c.rows << " rows from " << c.p0 << ", " << c.q_heads << " query heads over "
      << c.kv_heads << ", " << c.splits << " splits";
  return out.str();
}

struct AttentionHost {
  AttentionHost(const AttentionCase& c, int window_tokens, int ring_rows, float q_scale)
      : window(window_tokens),
        ring(ring_rows),
        angles(c.hd / 8),
        rows(c.rows + 1),
        width(c.kv_heads * c.hd),
        group(c.q_heads / c.kv_heads) {
    const int64_t last = c.p0 + c.rows - 1;
    max_blocks = static_cast<int>(last / block_tokens + 1);
    const int64_t cache_rows = c.sliding ? 2 * ring : int64_t{2} * max_blocks * block_tokens;
    tables.assign(size_t(2) * max_blocks, 0);  // slot 1's row: blocks in reverse order
    for (int b = 0; b < max_blocks; ++b) tables[max_blocks + b] = 2 * max_blocks - 1 - b;
    cos.resize(size_t(last + 1) * angles);
    sin.resize(cos.size());
    for (int64_t p = 0; p <= last; ++p) {
      for (int j = 0; j < angles; ++j) {
        cos[p * angles + j] = std::cos(p * std::pow(1e4f, -2.0f * j / c.hd));
        sin[p * angles + j] = std::sin(p * std::pow(1e4f, -2.0f * j / c.hd));
      }
    }
    positions.assign(rows, -1);
    for (int r = 0; r < c.rows; ++r) positions[r] = c.p0 + r;
    chunk_start.assign(rows, c.p0);
    chunk_end.assign(rows, last + 1);
    v = RandomBf16(size_t(cache_rows) * width, 9);
    k = RandomBf16(size_t(cache_rows) * width, 10);
    k_norm = RandomBf16(c.hd, 11);
    q = RandomFloats(size_t(rows) * c.q_heads * c.hd, 12, q_scale);
    fresh_k = RandomFloats(size_t(rows) * width, 13);
    fresh_v = RandomFloats(size_t(rows) * width, 14);
  }

  int window, ring, block_tokens = 8, angles, rows, width, group, max_blocks = 0;
  std::vector<int32_t> tables;  // [2][max_blocks]: the sequence is slot 1
  std::vector<float> cos, sin, q, fresh_k, fresh_v;
  std::vector<uint16_t> k, v, k_norm;
  std::vector<int64_t> positions, chunk_start, chunk_end;
};

struct AttentionDevice {
  AttentionDevice(const AttentionCase& c, const AttentionHost& h)
      : v(h.v),
        k(h.k),
        k_norm(h.k_norm),
        q(h.q),
        fresh_k(h.fresh_k),
        fresh_v(h.fresh_v),
        cos(h.cos),
        sin(h.sin),
        tables(h.tables),
        slots(std::vector<int32_t>(h.rows, 1)),
        first_row(std::vector<int32_t>(h.rows, 0)),
        positions(h.positions),
        chunk_start(h.chunk_start),
        chunk_end(h.chunk_end),
        kv{.k = c.k_eq_v ? nullptr : k.get(),
           .v = v.get(),
           .k_norm = k_norm.get(),
           .sliding = c.sliding,
           .window = h.window,
           .ring = h.ring,
           .kv_heads = c.kv_heads,
           .head_dim = c.hd,
           .block_tokens = h.block_tokens,
           .rope = RopeView{cos.get(), sin.get(), h.angles}},
        t{.positions = positions.get(),
          .slots = slots.get(),
          .chunk_start = chunk_start.get(),
          .first_row = first_row.get(),
          .chunk_end = chunk_end.get(),
          .blocks = tables.get(),
          .max_blocks = h.max_blocks},
        heads{c.q_heads, 0, h.group, 0},
        outputs(size_t(h.rows) * c.q_heads * c.hd),
        partials(outputs / c.hd * c.splits * (c.hd + 2)) {}

  DeviceVec<uint16_t> v, k, k_norm;
  DeviceVec<float> q, fresh_k, fresh_v, cos, sin;
  DeviceVec<int32_t> tables, slots, first_row;
  DeviceVec<int64_t> positions, chunk_start, chunk_end;
  KvLayerView kv;
  RowTables t;
  HeadRange heads;
  size_t outputs;   // floats of the output: rows × q_heads × head_dim
  size_t partials;  // floats of the splits' partials
};

}  // namespace temper::engine::cuda::testing
