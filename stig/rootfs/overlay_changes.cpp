#include "stig/rootfs/overlay_changes.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <optional>

#include <fmt/format.h>

#include "platform/process.h"
#include "platform/scratch_dir.h"
#include "platform/unique_fd.h"
#include "stig/change_set_redaction.h"
#include "stig/rootfs/overlay_walk.h"

namespace temper::stig {
namespace {

// Diff text kept per change set: a fix that rewrites hundreds of text files (a package's docs)
// should not turn one attempt's record into tens of megabytes.
constexpr std::uint64_t kMaxDiffBytesTotal = 2 << 20;
// git's heuristic: a NUL byte in the first 8000 bytes makes a file binary.
constexpr std::size_t kBinarySniffBytes = 8000;
Status WriteWhole(const std::string& path, const std::string& text) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
  if (!fd.valid()) return Status::FromErrno(errno, "creating " + path);
  if (::write(fd.get(), text.data(), text.size()) != static_cast<ssize_t>(text.size())) {
    return Status::FromErrno(errno, "writing " + path);
  }
  return Status::OK();
}

// What `diff -u --label a/REL --label b/REL` prints for a file that is all added (or all
// deleted): every line on one side, one hunk, and diff's note for a last line without a newline.
// Empty content has no diff, as with diff.
std::string OneSidedDiff(const std::string& rel, const std::string& content, bool added) {
  if (content.empty()) return "";
  std::size_t lines = static_cast<std::size_t>(std::count(content.begin(), content.end(), '\n'));
  bool no_newline_at_end = content.back() != '\n';
  if (no_newline_at_end) ++lines;
  std::string range = lines == 1 ? "1" : fmt::format("1,{}", lines);
  std::string out =
      fmt::format("--- a/{}\n+++ b/{}\n@@ {} @@\n", rel, rel, added ? "-0,0 +" + range : "-" + range + " +0,0");
  out.reserve(out.size() + content.size() + lines + 32);
  char sign = added ? '+' : '-';
  std::size_t at = 0;
  while (at < content.size()) {
    std::size_t end = content.find('\n', at);
    out += sign;
    if (end == std::string::npos) {
      out.append(content, at, std::string::npos);
      out += "\n\\ No newline at end of file\n";
      break;
    }
    out.append(content, at, end + 1 - at);
    at = end + 1;
  }
  return out;
}

class Collector {
 public:
  explicit Collector(OverlayWalk& walk) : walk_(walk) {}

  Result<ChangeSet> Run() {
    TEMPER_ASSIGN_OR_RETURN(std::vector<OverlayPathChange> changes, walk_.ChangedPaths());
    for (const OverlayPathChange& change : changes) TEMPER_RETURN_IF_ERROR(Add(change));
    TEMPER_ASSIGN_OR_RETURN(out_.packages, walk_.Packages(changes));
    TEMPER_ASSIGN_OR_RETURN(out_.services, walk_.Services(changes));
    return std::move(out_);
  }

 private:
  Status Add(const OverlayPathChange& change) {
    FileChange c{.path = change.path, .before = change.before_state, .after = change.after_state};
    if (!change.after) {
      c.change = FileChangeKind::kDeleted;
    } else if (!change.before) {
      c.change = FileChangeKind::kAdded;
    } else {
      c.change = change.content_changed ? FileChangeKind::kModified : FileChangeKind::kMetadata;
    }
    const FoundPath* before_file = change.before && S_ISREG(change.before->st.st_mode) ? &*change.before : nullptr;
    const FoundPath* after_file = change.after && S_ISREG(change.after->st.st_mode) ? &*change.after : nullptr;
    if (change.content_changed && (before_file || after_file)) TEMPER_RETURN_IF_ERROR(Diff(c, before_file, after_file));
    out_.files.push_back(std::move(c));
    return Status::OK();
  }

  // Fills c.diff, c.binary or c.diff_skipped for the regular files `before` and `after` (null: that
  // side has none).
  Status Diff(FileChange& c, const FoundPath* before, const FoundPath* after) {
    bool large = false;
    std::string text[2];  // the sides' contents, when they are small enough to diff
    const std::pair<const FoundPath*, const std::optional<FileState>&> sides[] = {{before, c.before}, {after, c.after}};
    for (int i = 0; i < 2; ++i) {
      const auto& [found, state] = sides[i];
      if (found == nullptr) continue;
      bool big = state->size > kMaxDiffFileBytes;
      large = large || big;
      TEMPER_ASSIGN_OR_RETURN(text[i], ReadFound(*found, big ? kBinarySniffBytes : kMaxDiffFileBytes));
      if (text[i].find('\0') != std::string::npos) c.binary = true;
    }
    if (c.binary) return Status::OK();
    if (large) {
      c.diff_skipped = fmt::format("larger than {} KiB", kMaxDiffFileBytes / 1024);
      return Status::OK();
    }
    if (diff_bytes_ >= kMaxDiffBytesTotal) {
      c.diff_skipped = fmt::format("this change set's diffs already reached {} MiB", kMaxDiffBytesTotal >> 20);
      return Status::OK();
    }
    std::string rel = c.path.substr(1);
    if (before == nullptr || after == nullptr) {
      // A file added or deleted whole: the diff is every line on one side, written here rather than
      // by a diff process per file (a package install adds thousands).
      c.diff = OneSidedDiff(rel, before == nullptr ? text[1] : text[0], /*added=*/before == nullptr);
    } else {
      // diff reads the copies read here, never the layers: nothing in them is opened by a program
      // that follows links or blocks on FIFOs.
      if (!copies_) {
        TEMPER_ASSIGN_OR_RETURN(ScratchDir made, ScratchDir::Create("", "diff"));
        copies_.emplace(std::move(made));
      }
      const std::string a = copies_->path() + "/a", b = copies_->path() + "/b";
      TEMPER_RETURN_IF_ERROR(WriteWhole(a, text[0]));
      TEMPER_RETURN_IF_ERROR(WriteWhole(b, text[1]));
      ProcessSpec spec;
      spec.argv = {"diff", "-u", "--label", "a/" + rel, "--label", "b/" + rel, a, b};
      spec.env = {"PATH=/usr/bin:/bin", "LC_ALL=C"};
      spec.timeout = std::chrono::seconds(30);
      spec.max_output_bytes = 4 * kMaxDiffFileBytes + 4096;
      TEMPER_ASSIGN_OR_RETURN(ProcessResult r, RunProcess(spec));
      // diff exits 0 when the files are the same, 1 when they differ, 2 on trouble.
      if (r.timed_out || r.term_signal != 0 || r.exit_code > 1) {
        return Status::IOError(fmt::format("diff of {} failed ({}): {}", c.path, r.Describe(), r.err));
      }
      c.diff = std::move(r.out);
    }
    // Password hashes never leave the host (change_set_redaction.h): the store, prompts and exports
    // all take the diff from here.
    c.diff = RedactHashesInDiff(c.path, c.diff);
    diff_bytes_ += c.diff.size();
    return Status::OK();
  }

  OverlayWalk& walk_;
  ChangeSet out_;
  std::uint64_t diff_bytes_ = 0;
  std::optional<ScratchDir> copies_;  // the two sides of the diff being made
};

}  // namespace

Result<ChangeSet> OverlayChanges(const OverlayLayers& layers) {
  TEMPER_ASSIGN_OR_RETURN(std::unique_ptr<OverlayWalk> walk, OverlayWalk::Open(layers));
  return Collector(*walk).Run();
}

}  // namespace temper::stig
