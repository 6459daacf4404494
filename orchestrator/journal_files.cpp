#include "orchestrator/journal_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

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
  return line.dump();
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

Result<uint64_t> JournalFiles::LastSeqLocked(const std::string& path) {
  int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return uint64_t{0};
    return Status::FromErrno(errno, fmt::format("opening {}", path));
  }
  struct stat st {};
  fstat(fd, &st);
  // Lines are short (events carry summaries, not transcripts): the tail holds the last two.
  const off_t tail = std::min<off_t>(st.st_size, 1 << 20);
  std::string buf(static_cast<size_t>(tail), '\0');
  ssize_t n = pread(fd, buf.data(), buf.size(), st.st_size - tail);
  if (n != tail) {
    close(fd);
    return Status::IOError(fmt::format("reading the end of {}", path));
  }
  size_t end = buf.size();
  if (end > 0 && buf[end - 1] != '\n') {
    // A torn line: cut it so the next append starts cleanly; Reconcile re-appends its event.
    size_t last_nl = buf.rfind('\n');
    off_t keep = last_nl == std::string::npos ? st.st_size - tail : st.st_size - tail + static_cast<off_t>(last_nl + 1);
    if (ftruncate(fd, keep) != 0) {
      int err = errno;
      close(fd);
      return Status::FromErrno(err, fmt::format("truncating the torn last line of {}", path));
    }
    end = last_nl == std::string::npos ? 0 : last_nl + 1;
  }
  close(fd);
  if (end == 0) return uint64_t{0};
  size_t start = buf.rfind('\n', end - 2);
  start = start == std::string::npos ? 0 : start + 1;
  nlohmann::json line = nlohmann::json::parse(buf.substr(start, end - 1 - start), nullptr, false);
  if (line.is_discarded() || !line.contains("seq") || !line["seq"].is_number_unsigned()) {
    return Status::DataLoss(fmt::format("{}: the last line is not a journal event", path));
  }
  return line["seq"].get<uint64_t>();
}

Result<uint64_t> JournalFiles::Reconcile(StateStore& store) {
  std::lock_guard lock(mu_);
  std::map<std::string, uint64_t> last_seq;  // per file, read once
  uint64_t appended = 0;
  uint64_t cursor = 0;
  while (true) {
    TEMPER_ASSIGN_OR_RETURN(std::vector<EventRecord> events, store.ReadEvents(cursor, std::nullopt, 1024));
    if (events.empty()) break;
    for (const EventRecord& e : events) {
      cursor = e.seq;
      std::string path = PathFor(e.batch_id);
      auto it = last_seq.find(path);
      if (it == last_seq.end()) {
        TEMPER_ASSIGN_OR_RETURN(uint64_t seq, LastSeqLocked(path));
        it = last_seq.emplace(path, seq).first;
      }
      if (e.seq <= it->second) continue;
      TEMPER_RETURN_IF_ERROR(AppendLocked(e));
      it->second = e.seq;
      ++appended;
    }
  }
  return appended;
}

}  // namespace temper
