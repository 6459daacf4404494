#include "stig/ssh/tar_stream_filter.h"

#include <algorithm>
#include <optional>

#include <fmt/format.h>

namespace temper::stig {
namespace {

constexpr std::size_t kBlock = 512;
// Offsets in a ustar header block.
constexpr std::size_t kSizeAt = 124, kSizeLength = 12;
constexpr std::size_t kChecksumAt = 148, kChecksumLength = 8;
constexpr std::size_t kTypeAt = 156;
// The largest member accepted: far above any file, far below an overflow of the arithmetic here.
constexpr std::uint64_t kMaxMemberSize = std::uint64_t{1} << 50;

std::uint64_t Padded(std::uint64_t size) { return (size + kBlock - 1) / kBlock * kBlock; }

// A numeric header field: octal digits (spaces or NULs around them), or GNU's base-256 form (the
// first byte's top bit set). nullopt when it is neither or out of range.
std::optional<std::uint64_t> HeaderNumber(std::string_view field) {
  const auto first = static_cast<unsigned char>(field[0]);
  if (first & 0x80) {
    if (first & 0x40) return std::nullopt;  // negative
    std::uint64_t value = first & 0x3f;
    for (std::size_t i = 1; i < field.size(); ++i) {
      if (value > (kMaxMemberSize >> 8)) return std::nullopt;
      value = (value << 8) | static_cast<unsigned char>(field[i]);
    }
    return value;
  }
  std::size_t i = 0;
  while (i < field.size() && field[i] == ' ') ++i;
  std::uint64_t value = 0;
  bool any = false;
  for (; i < field.size() && field[i] >= '0' && field[i] <= '7'; ++i) {
    value = value * 8 + static_cast<std::uint64_t>(field[i] - '0');
    if (value > kMaxMemberSize) return std::nullopt;
    any = true;
  }
  for (; i < field.size(); ++i) {
    if (field[i] != ' ' && field[i] != '\0') return std::nullopt;
  }
  if (!any) return std::nullopt;
  return value;
}

bool ChecksumMatches(std::string_view block) {
  std::optional<std::uint64_t> stored = HeaderNumber(block.substr(kChecksumAt, kChecksumLength));
  if (!stored) return false;
  // The sum of the header's bytes with the checksum field read as spaces; old tars summed signed
  // chars, and readers accept both.
  std::uint64_t unsigned_sum = 0;
  std::int64_t signed_sum = 0;
  for (std::size_t i = 0; i < kBlock; ++i) {
    bool in_field = i >= kChecksumAt && i < kChecksumAt + kChecksumLength;
    char c = in_field ? ' ' : block[i];
    unsigned_sum += static_cast<unsigned char>(c);
    signed_sum += static_cast<signed char>(c);
  }
  return *stored == unsigned_sum || static_cast<std::int64_t>(*stored) == signed_sum;
}

// The "size" record of a pax extended header's data ("LEN key=value\n" records), if it has one.
// Records that do not parse end the search: tar itself judges them.
std::optional<std::uint64_t> PaxSize(std::string_view data) {
  std::optional<std::uint64_t> size;
  while (!data.empty()) {
    std::size_t space = data.find(' ');
    if (space == std::string_view::npos || space == 0 || space > 20) break;
    std::uint64_t length = 0;
    bool digits = true;
    for (char c : data.substr(0, space)) {
      digits = digits && c >= '0' && c <= '9';
      if (digits) length = length * 10 + static_cast<std::uint64_t>(c - '0');
    }
    if (!digits || length <= space + 1 || length > data.size()) break;
    std::string_view record = data.substr(space + 1, length - space - 2);  // without the '\n'
    if (record.starts_with("size=")) {
      std::uint64_t value = 0;
      bool valid = record.size() > 5 && record.size() <= 5 + 16;
      for (char c : record.substr(5)) {
        valid = valid && c >= '0' && c <= '9';
        if (valid) value = value * 10 + static_cast<std::uint64_t>(c - '0');
      }
      if (valid && value <= kMaxMemberSize) size = value;
    }
    data.remove_prefix(length);
  }
  return size;
}

}  // namespace

Status TarStreamFilter::Feed(std::string_view in, std::string& out) {
  while (!in.empty()) {
    switch (state_) {
      case State::kEnd:
        // tar stops reading at the end-of-archive blocks; what follows (more zeros) passes.
        out.append(in);
        offset_ += in.size();
        return Status::OK();
      case State::kMemberData: {
        std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(in.size(), member_left_));
        out.append(in.substr(0, n));
        member_left_ -= n;
        offset_ += n;
        in.remove_prefix(n);
        if (member_left_ == 0) state_ = State::kHeader;
        break;
      }
      case State::kExtendedData: {
        std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(in.size(), extended_left_));
        held_.append(in.substr(0, n));
        extended_left_ -= n;
        offset_ += n;
        in.remove_prefix(n);
        if (extended_left_ == 0) TEMPER_RETURN_IF_ERROR(TakeExtendedData());
        break;
      }
      case State::kHeader: {
        std::size_t n = std::min(kBlock - block_.size(), in.size());
        block_.append(in.substr(0, n));
        offset_ += n;
        in.remove_prefix(n);
        if (block_.size() == kBlock) {
          std::string block = std::move(block_);
          block_.clear();
          TEMPER_RETURN_IF_ERROR(TakeHeader(block, out));
        }
        break;
      }
    }
  }
  return Status::OK();
}

Status TarStreamFilter::TakeHeader(std::string_view block, std::string& out) {
  const std::uint64_t at = offset_ - kBlock;
  if (std::all_of(block.begin(), block.end(), [](char c) { return c == '\0'; })) {
    out.append(held_);
    held_.clear();
    out.append(block);
    state_ = State::kEnd;
    return Status::OK();
  }
  if (!ChecksumMatches(block)) {
    return Status::InvalidArgument(fmt::format("the archive has no valid tar header at byte {} (bad checksum)", at));
  }
  const char type = block[kTypeAt];
  std::optional<std::uint64_t> size = HeaderNumber(block.substr(kSizeAt, kSizeLength));
  if (!size) return Status::InvalidArgument(fmt::format("the tar header at byte {} has no valid size", at));
  switch (type) {
    case 'x':  // pax extended header for the next member
    case 'L':  // GNU long name or link name for the next member
    case 'K':
      if (held_.size() + kBlock + Padded(*size) > kMaxHeldBytes) {
        return Status::InvalidArgument(fmt::format(
            "the archive's extended headers at byte {} exceed {} MiB for one member", at, kMaxHeldBytes >> 20));
      }
      held_.append(block);
      extended_type_ = type;
      extended_size_ = *size;
      extended_left_ = Padded(*size);
      state_ = State::kExtendedData;
      if (extended_left_ == 0) return TakeExtendedData();
      return Status::OK();
    case 'g':  // pax global header: applies to the whole archive, passes as it is
      out.append(block);
      member_left_ = Padded(*size);
      state_ = member_left_ > 0 ? State::kMemberData : State::kHeader;
      return Status::OK();
    case '3':  // character device
    case '4':  // block device
    case '6':  // FIFO
      ++skipped_special_;
      held_.clear();
      has_pax_size_ = false;
      member_left_ = 0;  // tar writes none of their data: there is none
      state_ = State::kHeader;
      return Status::OK();
    case '0':
    case '\0':
    case '7':  // regular files: their data follows
    case '1':  // hard link, symlink, directory: no data
    case '2':
    case '5': {
      const bool regular = type == '0' || type == '\0' || type == '7';
      const std::uint64_t data = regular ? (has_pax_size_ ? pax_size_ : *size) : 0;
      out.append(held_);
      held_.clear();
      has_pax_size_ = false;
      out.append(block);
      ++members_;
      member_left_ = Padded(data);
      state_ = member_left_ > 0 ? State::kMemberData : State::kHeader;
      return Status::OK();
    }
    default:
      return Status::InvalidArgument(
          fmt::format("the tar member at byte {} has type '{}', which a copy of a file system never holds", at,
                      type >= 0x20 && type < 0x7f ? std::string(1, type)
                                                  : fmt::format("\\x{:02x}", static_cast<unsigned char>(type))));
  }
}

Status TarStreamFilter::TakeExtendedData() {
  if (extended_type_ == 'x') {
    std::string_view data(held_);
    data = data.substr(held_.size() - Padded(extended_size_), extended_size_);
    if (std::optional<std::uint64_t> size = PaxSize(data)) {
      pax_size_ = *size;
      has_pax_size_ = true;
    }
  }
  state_ = State::kHeader;
  return Status::OK();
}

Status TarStreamFilter::Finish() const {
  if (state_ == State::kEnd) return Status::OK();
  return Status::InvalidArgument(fmt::format("the archive ended at byte {} {}", offset_,
                                             state_ == State::kHeader && block_.empty() && held_.empty()
                                                 ? "without its end-of-archive blocks"
                                                 : "inside a member"));
}

}  // namespace temper::stig
