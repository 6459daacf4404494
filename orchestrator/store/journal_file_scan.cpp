#include "orchestrator/store/journal_file_scan.h"

#include <cstring>
#include <optional>
#include <streambuf>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/text_cut.h"

namespace temper {

namespace {

constexpr size_t kChunkBytes = 64 << 10;
// A problem's description stays a log line, whatever the parser quoted.
constexpr size_t kMaxWhatBytes = 240;

// Presents `in` one line at a time: while a line is current, its bytes (the newline excluded) are
// all this streambuf holds, so a parser reading it as a stream stops at the line's end. Memory is
// one chunk, whatever the line's length.
class LineView final : public std::streambuf {
 public:
  explicit LineView(std::istream& in) : in_(in), buf_(kChunkBytes) {}

  // Makes the next line current. False when `in` has no byte left (or failed: see failed()).
  bool Next() {
    line_bytes_ = 0;
    newline_ = false;
    if (pos_ == end_ && !Refill()) return false;
    Expose();
    return true;
  }
  // Consumes what is left of the current line, newline included.
  void Finish() {
    while (true) {
      setg(eback(), egptr(), egptr());  // whatever the reader left of the exposed part
      Consume();
      if (newline_) {
        ++pos_;  // the newline itself
        return;
      }
      if (!Refill()) return;  // the end of `in`: a line without its newline
      Expose();
    }
  }
  uint64_t line_bytes() const { return line_bytes_; }
  bool ended_with_newline() const { return newline_; }
  bool failed() const { return failed_; }

 protected:
  int_type underflow() override {
    Consume();
    if (newline_) return traits_type::eof();
    if (!Refill()) return traits_type::eof();
    Expose();
    return gptr() == egptr() ? traits_type::eof() : traits_type::to_int_type(*gptr());
  }

 private:
  // Counts the bytes the reader took from the get area.
  void Consume() {
    const size_t taken = static_cast<size_t>(gptr() - eback());
    line_bytes_ += taken;
    pos_ += taken;
    setg(gptr(), gptr(), egptr());
  }
  // The current line's bytes in the buffer from pos_: up to its newline, or to the buffer's end.
  void Expose() {
    const char* from = buf_.data() + pos_;
    const void* nl = std::memchr(from, '\n', end_ - pos_);
    newline_ = nl != nullptr;
    char* stop = nl != nullptr ? static_cast<char*>(const_cast<void*>(nl)) : buf_.data() + end_;
    setg(const_cast<char*>(from), const_cast<char*>(from), stop);
  }
  // Reads the next chunk once the buffer is used up. False at the end of `in`.
  bool Refill() {
    if (pos_ < end_) return true;
    in_.read(buf_.data(), static_cast<std::streamsize>(buf_.size()));
    end_ = static_cast<size_t>(in_.gcount());
    pos_ = 0;
    if (in_.bad()) failed_ = true;
    setg(buf_.data(), buf_.data(), buf_.data());
    return end_ > 0;
  }

  std::istream& in_;
  std::vector<char> buf_;
  size_t pos_ = 0;  // the next byte not yet part of a consumed line
  size_t end_ = 0;  // bytes in buf_
  uint64_t line_bytes_ = 0;
  bool newline_ = false;  // the current line's newline is in the buffer, at egptr()
  bool failed_ = false;
};

// Finds the top-level "seq" of one line without building it: depth costs a counter, not memory.
class SeqFinder {
 public:
  using json = nlohmann::json;
  bool null() { return Value(); }
  bool boolean(bool) { return Value(); }
  bool number_integer(json::number_integer_t) { return Value(); }
  bool number_unsigned(json::number_unsigned_t v) {
    if (seq_key_) seq = v;
    return Value();
  }
  bool number_float(json::number_float_t, const json::string_t&) { return Value(); }
  bool string(json::string_t&) { return Value(); }
  bool binary(json::binary_t&) { return Value(); }
  bool start_object(std::size_t) {
    if (depth_ == 0) object = true;
    ++depth_;
    seq_key_ = false;
    return true;
  }
  bool key(json::string_t& k) {
    seq_key_ = depth_ == 1 && k == "seq";
    return true;
  }
  bool end_object() {
    --depth_;
    return true;
  }
  bool start_array(std::size_t) {
    ++depth_;
    seq_key_ = false;
    return true;
  }
  bool end_array() {
    --depth_;
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) {
    error = e.what();
    return false;
  }

  bool object = false;
  std::optional<uint64_t> seq;
  std::string error;

 private:
  bool Value() {
    seq_key_ = false;
    return true;
  }
  int64_t depth_ = 0;
  bool seq_key_ = false;
};

}  // namespace

Result<JournalFileScan> ScanJournal(std::istream& in) {
  JournalFileScan scan;
  LineView view(in);
  uint64_t offset = 0;
  while (view.Next()) {
    SeqFinder finder;
    {
      std::istream line(&view);
      nlohmann::json::sax_parse(line, &finder, nlohmann::json::input_format_t::json, /*strict=*/true);
    }
    view.Finish();
    if (view.failed()) break;
    const uint64_t bytes = view.line_bytes();
    if (!view.ended_with_newline()) {
      scan.torn_bytes = bytes;
      break;
    }
    ++scan.lines;
    scan.longest_line = std::max(scan.longest_line, bytes);
    std::string what;
    if (!finder.error.empty()) {
      what = "not JSON: " + finder.error;
    } else if (!finder.object || !finder.seq || *finder.seq == 0) {
      what = "not a journal event (no positive top-level \"seq\")";
    } else if (*finder.seq <= scan.last_seq) {
      what = fmt::format("seq {} does not follow seq {}", *finder.seq, scan.last_seq);
    } else {
      scan.last_seq = *finder.seq;
      ++scan.events;
    }
    if (!what.empty()) {
      if (scan.problems.size() < kMaxReportedProblems) {
        scan.problems.push_back({scan.lines, offset, bytes, CutWithMarker(what, kMaxWhatBytes)});
      }
      ++scan.problem_count;
    }
    offset += bytes + 1;
  }
  if (view.failed()) return Status::IOError(fmt::format("reading stopped after byte {}", offset));
  scan.complete_bytes = offset;
  return scan;
}

}  // namespace temper
