// Message chunks: a response too large for one gRPC message, streamed as chunks bounded by bytes.
// The daemon's ChunkPacker cuts it; a client's ChunkAssembler puts it back together.
//
// gRPC refuses a message over 4 MiB by default, and it is the receiver that refuses, where the
// sender cannot see it: a whole-profile batch's report is several times that (issue 22), and one
// attempt whose change set lists a package's twenty thousand files is over it alone. So the calls
// whose answer grows with a batch (GetBatchReport, GetRuleMemory) stream chunks, each a oneof of
//   part      a message of the whole's own type holding some of its items, and
//   fragment  a piece of one serialized part too large for a chunk (temper.v1.Fragment).
// Merging the parts in order (protobuf's MergeFrom: repeated fields append, singular messages
// merge, scalars that are set replace) rebuilds the whole exactly, so neither side knows the
// whole's shape: the daemon adds items, each a part holding one piece of the whole (the batch's
// own fields, one rule, one attempt, ...), in the order the whole lists them, and the packer fills
// a part with them up to kChunkBytes, cutting by bytes, not by count.
//
// Answers that are lists (ListBatches, ListHosts, a batch's rules) are paged instead, and a page
// is filled up to the same bytes (PageBudget).
//
// Bounds: every chunk holds at most max_bytes of parts or fragment data (plus a few bytes of
// framing), whatever the whole's size, and the packer holds at most one part in memory. The
// assembler checks order (fragments contiguous, a part never inside a fragmented one, the stream
// not ending inside one), so a stream cut short or mixed up is DataLoss, never a wrong message.
//
// Thread safety: none; one packer or assembler per stream.
#pragma once

#include <charconv>
#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include <fmt/format.h>

#include "common/status.h"
#include "temper/v1/temper.pb.h"

namespace temper {

// A chunk's bytes of parts or fragment data: a quarter of gRPC's default 4 MiB limit, so framing
// and a client with a smaller limit of its own keep a wide margin.
inline constexpr size_t kChunkBytes = size_t{1} << 20;

// What a repeated field's item costs beyond its own bytes: its tag and length.
inline constexpr size_t kItemFramingBytes = 6;

// A page of a repeated field (a list's batches or hosts, a batch's rules) filled up to a byte
// budget, so that a list answer stays under one chunk's bytes however large its items are: items
// are taken while they fit, and the first one always is, so every page makes progress.
class PageBudget {
 public:
  // `used_bytes`: what the rest of the message takes.
  explicit PageBudget(size_t used_bytes, size_t max_bytes = kChunkBytes) : used_(used_bytes), max_(max_bytes) {}

  // True, counting it, when an item of `item_bytes` fits, or when the page has no item yet.
  bool Take(size_t item_bytes) {
    const size_t cost = item_bytes + kItemFramingBytes;
    if (items_ > 0 && used_ + cost > max_) return false;
    used_ += cost;
    ++items_;
    return true;
  }

 private:
  size_t used_;
  const size_t max_;
  size_t items_ = 0;
};

// Where a page of a list of `size` items starts, from a token that is the position of its first
// item ("" for the first page). InvalidArgument naming `field` for anything else: a token from
// another list, or past this one's end.
inline Result<size_t> PagePosition(std::string_view token, size_t size, std::string_view field) {
  if (token.empty()) return size_t{0};
  size_t position = 0;
  auto [end, ec] = std::from_chars(token.data(), token.data() + token.size(), position);
  if (ec != std::errc() || end != token.data() + token.size() || position > size) {
    return Status::InvalidArgument(fmt::format("{}: not a token this server issued", field));
  }
  return position;
}

// The part type of a chunk message (BatchReport for BatchReportChunk).
template <typename Chunk>
using ChunkPart = std::remove_cvref_t<decltype(std::declval<const Chunk&>().part())>;

template <typename Chunk>
class ChunkPacker {
 public:
  using Part = ChunkPart<Chunk>;
  // Delivers one chunk; false when it could not (the client went away). After a false the packer
  // sends nothing more, and Add and Flush return false.
  using Send = std::function<bool(const Chunk&)>;

  explicit ChunkPacker(Send send, size_t max_bytes = kChunkBytes) : send_(std::move(send)), max_bytes_(max_bytes) {}
  ChunkPacker(const ChunkPacker&) = delete;
  ChunkPacker& operator=(const ChunkPacker&) = delete;

  // Adds `item`, a part holding the next piece of the whole. The part being filled is sent first
  // when `item` would take it over max_bytes; an item over max_bytes by itself goes as fragments.
  // False once a send failed: stop adding.
  bool Add(const Part& item) {
    if (failed_) return false;
    const size_t size = item.ByteSizeLong();
    if (pending_bytes_ > 0 && pending_bytes_ + size > max_bytes_ && !Flush()) return false;
    if (size > max_bytes_) return SendFragments(item.SerializeAsString());
    // The sum of the items' sizes bounds the merged part's: merging never adds bytes.
    pending_.MergeFrom(item);
    pending_bytes_ += size;
    return true;
  }

  // Sends the part being filled, if any: call it once the last item was added.
  bool Flush() {
    if (failed_) return false;
    if (pending_bytes_ == 0) return true;
    Chunk chunk;
    chunk.mutable_part()->Swap(&pending_);
    pending_bytes_ = 0;
    return Deliver(chunk);
  }

 private:
  bool SendFragments(const std::string& bytes) {
    for (size_t offset = 0; offset < bytes.size(); offset += max_bytes_) {
      Chunk chunk;
      temper::v1::Fragment* fragment = chunk.mutable_fragment();
      fragment->set_total_bytes(bytes.size());
      fragment->set_offset(offset);
      fragment->set_data(bytes.substr(offset, max_bytes_));
      if (!Deliver(chunk)) return false;
    }
    return true;
  }

  bool Deliver(const Chunk& chunk) {
    failed_ = !send_(chunk);
    return !failed_;
  }

  Send send_;
  const size_t max_bytes_;
  Part pending_;
  size_t pending_bytes_ = 0;  // the sum of the sizes of the items merged into pending_
  bool failed_ = false;
};

template <typename Chunk>
class ChunkAssembler {
 public:
  using Part = ChunkPart<Chunk>;

  // Takes the stream's next chunk. DataLoss, naming what did not follow, when a fragment is not
  // the continuation of the one before it, a part comes inside a fragmented one, or a chunk holds
  // neither (from a newer temperd: this client cannot read the whole).
  Status Add(const Chunk& chunk) {
    const std::string& name = Part::descriptor()->name();
    if (chunk.has_fragment()) {
      const temper::v1::Fragment& f = chunk.fragment();
      if (f.offset() != fragment_.size() || (f.offset() > 0 && f.total_bytes() != fragment_total_) ||
          f.data().empty() || f.data().size() > f.total_bytes() - fragment_.size()) {
        return Status::DataLoss(fmt::format(
            "{} stream: a fragment of {} bytes at offset {} of {} does not follow the {} of {} bytes received", name,
            f.data().size(), f.offset(), f.total_bytes(), fragment_.size(), fragment_total_));
      }
      fragment_total_ = f.total_bytes();
      fragment_ += f.data();
      if (fragment_.size() < fragment_total_) return Status::OK();
      if (!whole_.MergeFromString(fragment_)) {
        return Status::DataLoss(fmt::format("{} stream: the {} bytes of a fragmented part do not parse as a {}", name,
                                            fragment_.size(), name));
      }
      fragment_.clear();
      fragment_total_ = 0;
      return Status::OK();
    }
    if (!fragment_.empty()) {
      return Status::DataLoss(fmt::format("{} stream: a part came after {} of the {} bytes of a fragmented one", name,
                                          fragment_.size(), fragment_total_));
    }
    if (!chunk.has_part()) {
      return Status::DataLoss(
          fmt::format("{} stream: a chunk with neither part nor fragment (is temperd newer than this client?)", name));
    }
    whole_.MergeFrom(chunk.part());
    return Status::OK();
  }

  // The whole, once the stream ended. DataLoss when it ended inside a fragmented part.
  Result<Part> Finish() && {
    if (!fragment_.empty()) {
      return Status::DataLoss(fmt::format("{} stream: it ended after {} of the {} bytes of a fragmented part",
                                          Part::descriptor()->name(), fragment_.size(), fragment_total_));
    }
    return std::move(whole_);
  }

 private:
  Part whole_;
  std::string fragment_;  // the bytes of the fragmented part received so far
  uint64_t fragment_total_ = 0;
};

}  // namespace temper
