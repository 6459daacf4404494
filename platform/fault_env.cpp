#include "platform/fault_env.h"

#include <fmt/format.h>

namespace temper {
namespace {

std::string_view OpName(FaultEnv::Op op) {
  switch (op) {
    case FaultEnv::Op::kWrite:
      return "write";
    case FaultEnv::Op::kSync:
      return "fsync";
    case FaultEnv::Op::kProcessStart:
      return "process start";
  }
  return "operation";
}

class FaultWritableFile final : public WritableFile {
 public:
  FaultWritableFile(FaultEnv& env, std::unique_ptr<WritableFile> base) : env_(env), base_(std::move(base)) {}
  const std::string& path() const override { return base_->path(); }

  Status Append(std::string_view data) override {
    Status injected = env_.Check(FaultEnv::Op::kWrite, "append to " + path());
    if (injected.ok()) return base_->Append(data);
    (void)base_->Append(data.substr(0, data.size() / 2));  // torn, as on a disk that filled up
    return injected;
  }
  Status Sync() override {
    TEMPER_RETURN_IF_ERROR(env_.Check(FaultEnv::Op::kSync, "fsync " + path()));
    return base_->Sync();
  }

 private:
  FaultEnv& env_;
  std::unique_ptr<WritableFile> base_;
};

}  // namespace

void FaultEnv::FailNth(Op op, std::uint64_t n) {
  std::lock_guard lock(mu_);
  fired_at_.clear();
  sticky_ = false;
  if (n == 0) {
    armed_op_.reset();
    return;
  }
  armed_op_ = op;
  armed_at_ = counts_[static_cast<int>(op)] + n;
}

void FaultEnv::FailFromNth(Op op, std::uint64_t n) {
  FailNth(op, n);
  std::lock_guard lock(mu_);
  sticky_ = n > 0;
}

bool FaultEnv::fired() const {
  std::lock_guard lock(mu_);
  return !fired_at_.empty();
}

std::string FaultEnv::fired_at() const {
  std::lock_guard lock(mu_);
  return fired_at_;
}

std::uint64_t FaultEnv::count(Op op) const {
  std::lock_guard lock(mu_);
  return counts_[static_cast<int>(op)];
}

Status FaultEnv::Check(Op op, const std::string& what) {
  std::lock_guard lock(mu_);
  std::uint64_t n = ++counts_[static_cast<int>(op)];
  if (armed_op_ != op || n < armed_at_ || (n > armed_at_ && !sticky_)) return Status::OK();
  if (!sticky_) armed_op_.reset();
  if (fired_at_.empty()) fired_at_ = fmt::format("{} #{} ({})", OpName(op), n, what);
  return Status::IOError(fmt::format("injected fault: {} #{} ({})", OpName(op), n, what));
}

void FaultEnv::SetClock(std::chrono::system_clock::time_point now) {
  std::lock_guard lock(mu_);
  if (!wall_) steady_ = base_.SteadyNow();
  wall_ = now;
}

void FaultEnv::AdvanceClock(std::chrono::milliseconds by) {
  std::lock_guard lock(mu_);
  if (!wall_) return;
  *wall_ += by;
  steady_ += by;
}

std::chrono::system_clock::time_point FaultEnv::Now() {
  std::lock_guard lock(mu_);
  return wall_ ? *wall_ : base_.Now();
}

std::chrono::steady_clock::time_point FaultEnv::SteadyNow() {
  std::lock_guard lock(mu_);
  return wall_ ? steady_ : base_.SteadyNow();
}

Result<std::unique_ptr<WritableFile>> FaultEnv::OpenAppendable(const std::string& path, mode_t mode) {
  TEMPER_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> file, base_.OpenAppendable(path, mode));
  return std::unique_ptr<WritableFile>(new FaultWritableFile(*this, std::move(file)));
}

Status FaultEnv::Truncate(const std::string& path, std::uint64_t size) {
  TEMPER_RETURN_IF_ERROR(Check(Op::kWrite, fmt::format("truncate {} to {} bytes", path, size)));
  return base_.Truncate(path, size);
}

Status FaultEnv::SyncDir(const std::string& path) {
  TEMPER_RETURN_IF_ERROR(Check(Op::kSync, "fsync directory " + path));
  return base_.SyncDir(path);
}

Status FaultEnv::WriteAt(PositionalFile& file, std::uint64_t offset, std::string_view data) {
  Status injected = Check(Op::kWrite, fmt::format("{} bytes at {} of {}", data.size(), offset, file.path()));
  if (injected.ok()) return base_.WriteAt(file, offset, data);
  (void)base_.WriteAt(file, offset, data.substr(0, data.size() / 2));  // torn, as on a disk that filled up
  return injected;
}

Status FaultEnv::Sync(PositionalFile& file) {
  TEMPER_RETURN_IF_ERROR(Check(Op::kSync, "fsync " + file.path()));
  return base_.Sync(file);
}

Status FaultEnv::Truncate(PositionalFile& file, std::uint64_t size) {
  TEMPER_RETURN_IF_ERROR(Check(Op::kWrite, fmt::format("truncate {} to {} bytes", file.path(), size)));
  return base_.Truncate(file, size);
}

Result<ProcessResult> FaultEnv::RunProcess(const ProcessSpec& spec) {
  TEMPER_RETURN_IF_ERROR(Check(Op::kProcessStart, spec.argv.empty() ? std::string("(no argv)") : spec.argv[0]));
  return base_.RunProcess(spec);
}

}  // namespace temper
