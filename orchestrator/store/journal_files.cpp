#include "orchestrator/store/journal_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "orchestrator/store/journal_event_bounds.h"

namespace temper {

namespace {

// Writes all of `data` (retrying short writes) and fsyncs.
Status WriteAllAndSync(int fd, const std::string& data, const std::string& path) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = write(fd, data.data() + done, data.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::FromErrno(errno, fmt::format("appending to {}", path));
    }
    done += static_cast<size_t>(n);
  }
  if (fsync(fd) != 0) return Status::FromErrno(errno, fmt::format("fsync {}", path));
  return Status::OK();
}

}  // namespace

Result<std::unique_ptr<JournalFiles>> JournalFiles::Open(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Status::IOError(fmt::format("cannot create journal directory {}: {}", dir, ec.message()));
  return std::unique_ptr<JournalFiles>(new JournalFiles(dir));
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
  std::string path = PathFor(event.batch_id);
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
  if (fd < 0) return Status::FromErrno(errno, fmt::format("opening {}", path));
  Status s = WriteAllAndSync(fd, ToJsonLine(event) + "\n", path);
  close(fd);
  return s;
}

Result<JournalFileScan> JournalFiles::ScanLocked(const std::string& path, FileRepair& repair) {
  repair.path = path;
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return JournalFileScan{};
    return Status::FromErrno(errno, fmt::format("opening {}", path));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::IOError(fmt::format("cannot open {}", path));
  Result<JournalFileScan> scan = ScanJournal(in);
  if (!scan.ok()) return scan.status().WithContext(path);
  in.close();
  if (scan->torn_bytes > 0) {
    if (truncate(path.c_str(), static_cast<off_t>(scan->complete_bytes)) != 0) {
      return Status::FromErrno(errno, fmt::format("cutting the torn last line of {}", path));
    }
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
      TEMPER_RETURN_IF_ERROR(AppendLocked(e));
      it->second = e.seq;
      ++out.appended;
    }
  }
  return out;
}

}  // namespace temper
