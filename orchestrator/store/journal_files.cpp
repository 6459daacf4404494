#include "orchestrator/store/journal_files.h"

#include <istream>
#include <map>
#include <streambuf>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/dcheck.h"
#include "orchestrator/store/journal_event_bounds.h"

namespace temper {

namespace {

// A file read through the Env as the istream ScanJournal takes. A read error ends the stream and is
// kept in status(): the caller checks it before trusting what the scan says about the file's end.
class EnvReadBuf final : public std::streambuf {
 public:
  explicit EnvReadBuf(temper::SequentialFile& file) : file_(file), buf_(64 << 10) {}
  const Status& status() const { return status_; }

 protected:
  int_type underflow() override {
    if (!status_.ok()) return traits_type::eof();
    Result<size_t> n = file_.Read(buf_.data(), buf_.size());
    if (!n.ok()) {
      status_ = n.status();
      return traits_type::eof();
    }
    if (*n == 0) return traits_type::eof();
    setg(buf_.data(), buf_.data(), buf_.data() + *n);
    return traits_type::to_int_type(buf_[0]);
  }

 private:
  temper::SequentialFile& file_;
  std::vector<char> buf_;
  Status status_;
};

}  // namespace

Result<std::unique_ptr<JournalFiles>> JournalFiles::Open(const std::string& dir, temper::Env& env) {
  Status created = env.CreateDirs(dir);
  if (!created.ok()) return created.WithContext("opening the journal files");
  return std::unique_ptr<JournalFiles>(new JournalFiles(dir, env));
}

std::string JournalFiles::PathFor(std::optional<int64_t> batch_id) const {
  if (!batch_id) return dir_ + "/daemon.jsonl";
  return fmt::format("{}/batch-{}.jsonl", dir_, *batch_id);
}

std::string JournalFiles::ToJsonLine(const EventRecord& e) {
  nlohmann::json data = nlohmann::json::parse(e.data_json, nullptr, /*allow_exceptions=*/false);
  nlohmann::json line = {
      {"seq", e.seq},
      {"time_ms", e.time},
      {"batch_id", e.batch_id ? nlohmann::json(std::to_string(*e.batch_id)) : nlohmann::json(nullptr)},
      {"target", e.target},
      {"rule_id", e.rule_id},
      {"role", e.role},
      {"type", e.type},
      {"data", data.is_discarded() ? nlohmann::json(e.data_json) : data},
      {"usage",
       {{"prompt_tokens", e.usage.prompt_tokens},
        {"completion_tokens", e.usage.completion_tokens},
        {"cached_prompt_tokens", e.usage.cached_prompt_tokens}}}};
  // Replace, not throw, should a field hold bytes that are not UTF-8: the line is written either way.
  return line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

Status JournalFiles::Append(const EventRecord& event) {
  std::lock_guard lock(mu_);
  return AppendLocked(event);
}

Status JournalFiles::AppendLocked(const EventRecord& event) {
  TEMPER_DCHECK(event.seq > 0, "a line is appended only after its event is committed (and so has a seq)");
  std::string path = PathFor(event.batch_id);
  if (withheld_.count(path)) {
    return Status::Unavailable(
        fmt::format("journal file {}: more than {} appends failed; the next start-up appends "
                    "every committed event it lacks",
                    path, kMaxPendingEvents));
  }
  auto pending = pending_.find(path);
  if (pending == pending_.end()) {
    Status written = WriteLocked(path, ToJsonLine(event) + "\n");
    if (!written.ok()) pending_[path].push_back(event);
    return written;
  }
  // An earlier append failed: cut what it left half-written, then write what the file lacks, in
  // seq order, before this event.
  pending->second.push_back(event);
  if (pending->second.size() > kMaxPendingEvents) {
    pending_.erase(pending);
    withheld_.insert(path);
    return Status::Unavailable(
        fmt::format("journal file {}: more than {} appends failed; it is left to the next "
                    "start-up, which appends every committed event it lacks",
                    path, kMaxPendingEvents));
  }
  FileRepair repair;
  TEMPER_ASSIGN_OR_RETURN(JournalFileScan scan, ScanLocked(path, repair));
  std::string lines;
  for (const EventRecord& e : pending->second) {
    // A failed fsync leaves its line whole in the file: written once, never twice.
    if (e.seq > scan.last_seq) lines += ToJsonLine(e) + "\n";
  }
  TEMPER_RETURN_IF_ERROR(WriteLocked(path, lines));
  pending_.erase(pending);
  return Status::OK();
}

Status JournalFiles::WriteLocked(const std::string& path, const std::string& lines) {
  TEMPER_ASSIGN_OR_RETURN(std::unique_ptr<temper::WritableFile> file, env_.OpenAppendable(path, 0600));
  TEMPER_RETURN_IF_ERROR(file->Append(lines));
  return file->Sync();
}

Result<JournalFileScan> JournalFiles::ScanLocked(const std::string& path, FileRepair& repair) {
  repair.path = path;
  Result<std::unique_ptr<temper::SequentialFile>> file = env_.OpenSequential(path);
  if (!file.ok()) {
    if (file.status().code() == StatusCode::kNotFound) return JournalFileScan{};
    return file.status();
  }
  EnvReadBuf buf(**file);
  std::istream in(&buf);
  Result<JournalFileScan> scan = ScanJournal(in);
  // A read error looks like the file's end to the scan: never cut a "torn" tail on its word.
  if (!buf.status().ok()) return buf.status();
  if (!scan.ok()) return scan.status().WithContext(path);
  file->reset();
  if (scan->torn_bytes > 0) {
    Status cut = env_.Truncate(path, scan->complete_bytes);
    if (!cut.ok()) return cut.WithContext("cutting the torn last line");
    repair.torn_bytes = scan->torn_bytes;
    repair.torn_offset = scan->complete_bytes;
  }
  repair.problems = scan->problems;
  repair.problem_count = scan->problem_count;
  repair.longest_line = scan->longest_line;
  return scan;
}

Result<JournalFiles::Reconciled> JournalFiles::Reconcile(StateStore& store) {
  std::lock_guard lock(mu_);
  std::map<std::string, uint64_t> last_seq;  // per file, read once
  Reconciled out;
  uint64_t cursor = 0;
  while (true) {
    TEMPER_ASSIGN_OR_RETURN(std::vector<EventRecord> events, store.ReadEvents(cursor, std::nullopt, 1024));
    if (events.empty()) break;
    for (const EventRecord& e : events) {
      cursor = e.seq;
      std::string path = PathFor(e.batch_id);
      auto it = last_seq.find(path);
      if (it == last_seq.end()) {
        FileRepair repair;
        TEMPER_ASSIGN_OR_RETURN(JournalFileScan scan, ScanLocked(path, repair));
        if (repair.torn_bytes > 0 || repair.problem_count > 0 || repair.longest_line > kMaxJournalLineBytes) {
          out.repairs.push_back(std::move(repair));
        }
        it = last_seq.emplace(path, scan.last_seq).first;
      }
      if (e.seq <= it->second) continue;
      TEMPER_RETURN_IF_ERROR(WriteLocked(path, ToJsonLine(e) + "\n"));
      it->second = e.seq;
      ++out.appended;
    }
  }
  // Every file now holds every committed event: what failed appends left behind is written.
  pending_.clear();
  withheld_.clear();
  return out;
}

}  // namespace temper
