#include "platform/env.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>

#include <fmt/format.h>

#include "platform/unique_fd.h"

namespace temper {
namespace {

class PosixWritableFile final : public WritableFile {
 public:
  PosixWritableFile(std::string path, UniqueFd fd) : path_(std::move(path)), fd_(std::move(fd)) {}
  const std::string& path() const override { return path_; }

  Status Append(std::string_view data) override {
    while (!data.empty()) {
      ssize_t n = ::write(fd_.get(), data.data(), data.size());
      if (n < 0) {
        if (errno == EINTR) continue;
        return Status::FromErrno(errno, fmt::format("appending to {}", path_));
      }
      data.remove_prefix(static_cast<std::size_t>(n));
    }
    return Status::OK();
  }

  Status Sync() override {
    if (::fsync(fd_.get()) != 0) return Status::FromErrno(errno, fmt::format("fsync {}", path_));
    return Status::OK();
  }

 private:
  const std::string path_;
  UniqueFd fd_;
};

class PosixSequentialFile final : public SequentialFile {
 public:
  PosixSequentialFile(std::string path, UniqueFd fd) : path_(std::move(path)), fd_(std::move(fd)) {}

  Result<std::size_t> Read(char* buf, std::size_t n) override {
    while (true) {
      ssize_t got = ::read(fd_.get(), buf, n);
      if (got >= 0) return static_cast<std::size_t>(got);
      if (errno != EINTR) return Status::FromErrno(errno, fmt::format("reading {}", path_));
    }
  }

 private:
  const std::string path_;
  UniqueFd fd_;
};

class PosixEnv final : public Env {
 public:
  Status CreateDirs(const std::string& path) override {
    std::error_code ec;
    std::filesystem::create_directories(path, ec);
    if (ec) return Status::IOError(fmt::format("cannot create directory {}: {}", path, ec.message()));
    return Status::OK();
  }

  Result<std::unique_ptr<WritableFile>> OpenAppendable(const std::string& path, mode_t mode) override {
    UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, mode));
    if (!fd.valid()) return Status::FromErrno(errno, fmt::format("opening {}", path));
    return std::unique_ptr<WritableFile>(new PosixWritableFile(path, std::move(fd)));
  }

  Result<std::unique_ptr<SequentialFile>> OpenSequential(const std::string& path) override {
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd.valid()) {
      if (errno == ENOENT) return Status::NotFound(fmt::format("{} does not exist", path));
      return Status::FromErrno(errno, fmt::format("opening {}", path));
    }
    return std::unique_ptr<SequentialFile>(new PosixSequentialFile(path, std::move(fd)));
  }

  Status Truncate(const std::string& path, std::uint64_t size) override {
    if (::truncate(path.c_str(), static_cast<off_t>(size)) != 0) {
      return Status::FromErrno(errno, fmt::format("truncating {} to {} bytes", path, size));
    }
    return Status::OK();
  }

  Status Remove(const std::string& path) override {
    if (::unlink(path.c_str()) != 0) {
      if (errno == ENOENT) return Status::NotFound(fmt::format("{} does not exist", path));
      return Status::FromErrno(errno, fmt::format("removing {}", path));
    }
    return Status::OK();
  }

  Status SyncDir(const std::string& path) override {
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!fd.valid()) return Status::FromErrno(errno, fmt::format("opening directory {}", path));
    if (::fsync(fd.get()) != 0) return Status::FromErrno(errno, fmt::format("fsync directory {}", path));
    return Status::OK();
  }

  Status WriteAt(PositionalFile& file, std::uint64_t offset, std::string_view data) override {
    return file.WriteAt(offset, data);
  }
  Status Sync(PositionalFile& file) override { return file.Sync(); }
  Status Truncate(PositionalFile& file, std::uint64_t size) override { return file.Truncate(size); }

  Result<ProcessResult> RunProcess(const ProcessSpec& spec) override { return temper::RunProcess(spec); }

  std::chrono::system_clock::time_point Now() override { return std::chrono::system_clock::now(); }
  std::chrono::steady_clock::time_point SteadyNow() override { return std::chrono::steady_clock::now(); }
};

}  // namespace

Env& Env::Default() {
  // Stateless: one for the whole process, like LevelDB's Env::Default().
  static PosixEnv env;
  return env;
}

}  // namespace temper
