// ScratchDir: a private temporary directory that is removed with everything in it when the owner
// goes out of scope, however the work in it ends (evaluation helpers, copied-back results).
// Thread safety: a value owned by one thread.
#pragma once

#include <stdlib.h>
#include <cerrno>
#include <filesystem>
#include <string>

#include "common/status.h"

namespace temper {

class ScratchDir {
 public:
  // Creates <parent>/temper-<stem>-XXXXXX (mode 0700); empty `parent` means the system temp directory.
  static Result<ScratchDir> Create(const std::string& parent, const std::string& stem = "eval") {
    namespace fs = std::filesystem;
    fs::path base = parent.empty() ? fs::temp_directory_path() : fs::path(parent);
    std::string tmpl = (base / ("temper-" + stem + "-XXXXXX")).string();
    if (!::mkdtemp(tmpl.data())) return Status::FromErrno(errno, "creating a scratch directory in " + base.string());
    return ScratchDir(tmpl);
  }
  ScratchDir(ScratchDir&& o) noexcept : path_(std::move(o.path_)) { o.path_.clear(); }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  ScratchDir& operator=(ScratchDir&&) = delete;
  ~ScratchDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  explicit ScratchDir(std::string p) : path_(std::move(p)) {}
  std::string path_;
};

}  // namespace temper
