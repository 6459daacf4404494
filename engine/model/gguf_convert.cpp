#include "engine/model/gguf_convert.h"

#include <stdlib.h>

#include <cerrno>
#include <cstdio>
#include <fstream>
#include <string>
#include <system_error>
#include <vector>

#include <fmt/format.h>

#include "engine/model/gguf_file.h"
#include "engine/model/gguf_model.h"
#include "engine/model/safetensors.h"
#include "engine/tokenizer/tokenizer_json_writer.h"

namespace temper::engine {
namespace {

namespace fs = std::filesystem;

Status WriteText(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return Status::FromErrno(errno, fmt::format("cannot create {}", path.string()));
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  out.flush();
  if (!out) return Status::FromErrno(errno, fmt::format("cannot write {}", path.string()));
  return Status::OK();
}

// The directory's files, written into `dir`.
Status WriteModelFiles(const GgufFile& file, const fs::path& dir) {
  TEMPER_ASSIGN_OR_RETURN(std::string config, GgufConfigJson(file));
  TEMPER_ASSIGN_OR_RETURN(TokenizerSpec spec, GgufTokenizerSpec(file));
  TEMPER_ASSIGN_OR_RETURN(std::string tokenizer, WriteTokenizerJson(spec));
  TEMPER_ASSIGN_OR_RETURN(std::optional<std::string> chat_template, GgufChatTemplate(file));
  TEMPER_ASSIGN_OR_RETURN(GgufBf16Tensors tensors, GgufGemma3Tensors(file));
  std::vector<TensorToWrite> out;
  for (const TensorInfo& t : tensors.tensors) {
    out.push_back({t.name, t.dtype, t.shape, tensors.storage.bytes().subspan(t.begin, t.end - t.begin)});
  }
  TEMPER_RETURN_IF_ERROR(WriteText(dir / "config.json", config));
  TEMPER_RETURN_IF_ERROR(WriteSafetensors(dir / "model.safetensors", out, {{"format", "pt"}}));
  TEMPER_RETURN_IF_ERROR(WriteText(dir / "tokenizer.json", tokenizer));
  if (chat_template) TEMPER_RETURN_IF_ERROR(WriteText(dir / "chat_template.jinja", *chat_template));
  return Status::OK();
}

}  // namespace

Status ConvertGgufToDirectory(const fs::path& gguf, const fs::path& out_dir) {
  std::error_code ec;
  if (fs::exists(out_dir, ec)) {
    if (!fs::is_directory(out_dir, ec)) {
      return Status::AlreadyExists(fmt::format("{} exists and is not a directory", out_dir.string()));
    }
    if (!fs::is_empty(out_dir, ec)) {
      return Status::AlreadyExists(fmt::format("{} is not empty; give a new or empty directory", out_dir.string()));
    }
  }
  TEMPER_ASSIGN_OR_RETURN(GgufFile file, GgufFile::Open(gguf));
  // A fresh directory beside OUT_DIR (same file system, so the rename is atomic).
  const fs::path parent = out_dir.has_parent_path() ? out_dir.parent_path() : fs::path(".");
  std::string pattern = (parent / fmt::format(".{}.converting-XXXXXX", out_dir.filename().string())).string();
  if (::mkdtemp(pattern.data()) == nullptr) {
    return Status::FromErrno(errno, fmt::format("cannot make a directory beside {}", out_dir.string()));
  }
  const fs::path staging(pattern);
  Status written = WriteModelFiles(file, staging);
  if (written.ok()) {
    // The directory mkdtemp made is 0700; a model directory is as readable as its parent lets it be.
    fs::permissions(staging,
                    fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec | fs::perms::others_read |
                        fs::perms::others_exec,
                    ec);
    // rename(2) replaces an empty directory, and refuses a non-empty one that appeared meanwhile.
    if (std::rename(staging.c_str(), out_dir.c_str()) != 0) {
      written = Status::FromErrno(errno, fmt::format("cannot rename {} to {}", staging.string(), out_dir.string()));
    }
  }
  if (!written.ok()) {
    fs::remove_all(staging, ec);
    return written;
  }
  return Status::OK();
}

}  // namespace temper::engine
