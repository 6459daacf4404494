// stig_bench: the speeds the loop depends on, measured on the real rootfs target and content.
//
//   stig_bench [--rootfs DIR] [--work DIR] [--reps N] [--baseline OUT_DIR]
//              [--packages CACHE_DIR] [--install NAME[,NAME...]] [--install-only 1]
//
// Prints, in milliseconds: one-rule evaluation and a whole-profile scan (Ubuntu 20.04 STIG, 191
// rules; medians), each with a fresh helper per evaluation (one-shot: load + evaluate) and through
// an evaluation server (eval_server.h: loaded once, a forked child per evaluation), reading its OVAL evidence back from
// the ARF, snapshot, and revert and change-set listing after a small change (one file) and after a large one (packages
// installed offline), the scratch view evaluations read, and taking one fix's snapshot out of the middle of the stack
// (the overlap check and the drop). With --packages the target gets that package cache (Debian's archive): each
// --install package is timed (the first fetch into the cache, then installs from it, reverted each time), and the
// baseline installs from it. With --baseline it also runs the SSG remediation baseline on a fresh target and prints its
// report (see bench/RESULTS.md). --install-only skips the evaluation and snapshot timings. Needs root (overlayfs,
// sandbox) and builds the rootfs into DIR on first use (mmdebstrap).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "bench/bench_timing.h"
#include "stig/baseline.h"
#include "stig/package_install.h"
#include "stig/rootfs/rootfs_builder.h"
#include "stig/rootfs/rootfs_target.h"
#include "stig/scap/content.h"
#include "stig/scap/evaluator.h"
#include "stig/scap/oval_evidence.h"

namespace {

using namespace temper;
using namespace temper::stig;
using bench::Clock;
using bench::Median;
using bench::Ms;

int Fail(const Status& s) {
  std::fprintf(stderr, "stig_bench: %s\n", s.ToString().c_str());
  return 1;
}

std::uint64_t TreeBytes(const std::string& root) {
  std::uint64_t total = 0;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(root, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    if (it->is_regular_file(ec) && !it->is_symlink(ec)) total += it->file_size(ec);
  }
  return total;
}

// One-rule evaluation and a whole-profile scan, through `ev`, printed as `mode`.
Status TimeEvaluations(RootfsTarget& t, const Evaluator& ev, const std::string& mode, int reps) {
  std::vector<double> one;
  EvaluationRequest req;
  req.rule_ids = {"sshd_disable_root_login"};
  for (int i = 0; i < reps; ++i) {
    auto a = Clock::now();
    auto e = t.Evaluate(ev, req);
    if (!e.ok()) return e.status();
    one.push_back(Ms(a, Clock::now()));
  }
  fmt::print("one-rule evaluation ({}): median {:.0f} ms over {}\n", mode, Median(one), reps);

  std::vector<double> whole;
  EvaluationRequest all;
  Evaluation last;
  for (int i = 0; i < std::min(reps, 3); ++i) {
    auto a = Clock::now();
    auto e = t.Evaluate(ev, all);
    if (!e.ok()) return e.status();
    whole.push_back(Ms(a, Clock::now()));
    last = *e;
  }
  std::string counts;
  for (const auto& [v, n] : last.Counts()) counts += fmt::format(" {} {}", n, VerdictName(v));
  fmt::print("whole-profile scan ({}, {} rules): median {:.0f} ms over {};{}\n", mode, last.verdicts.size(),
             Median(whole), whole.size(), counts);
  return Status::OK();
}

// Evaluations one-shot and through a server (started first, timed apart), then the ARF's evidence,
// snapshot, and revert after small and large changes.
Status TimeEvaluationAndSnapshots(RootfsTarget& t, const Evaluator& ev, int reps) {
  const Logger quiet(LogLevel::kWarning);
  Evaluator one_shot(ev.content(), {.use_servers = false}, quiet);
  TEMPER_RETURN_IF_ERROR(TimeEvaluations(t, one_shot, "one-shot: a fresh helper, load + eval", reps));
  auto a = Clock::now();
  auto started = t.Evaluate(ev, {.rule_ids = {"sshd_disable_root_login"}});
  if (!started.ok()) return started.status();
  fmt::print("evaluation server: first one-rule evaluation, server start included, {:.0f} ms\n", Ms(a, Clock::now()));
  TEMPER_RETURN_IF_ERROR(TimeEvaluations(t, ev, "server: a forked child of the loaded content", reps));

  // OpenSCAP's evidence for every rule, read back from the whole-profile ARF file.
  EvaluationRequest with_files;
  with_files.output_dir = std::filesystem::absolute("build/stig-bench-results").string();
  auto scanned = t.Evaluate(ev, with_files);
  if (!scanned.ok()) return scanned.status();
  auto a0 = Clock::now();
  auto evidence = ReadOvalEvidence(scanned->arf_path);
  if (!evidence.ok()) return evidence.status();
  fmt::print("OVAL evidence of the whole-profile ARF ({:.1f} MB, {} rules): {:.0f} ms\n",
             std::filesystem::file_size(scanned->arf_path) / 1e6, evidence->size(), Ms(a0, Clock::now()));

  std::vector<double> snap, revert_small, revert_large, changes_small;
  for (int i = 0; i < reps; ++i) {
    auto start = Clock::now();
    auto s = t.Snapshot();
    if (!s.ok()) return s.status();
    snap.push_back(Ms(start, Clock::now()));
    if (auto w = t.WriteFile("/etc/ssh/sshd_config.d/bench.conf", "PermitRootLogin no\n", 0644); !w.ok()) return w;
    start = Clock::now();
    if (auto c = t.ChangesSinceSnapshot(); !c.ok()) return c.status();
    changes_small.push_back(Ms(start, Clock::now()));
    start = Clock::now();
    if (auto r = t.Revert(*s); !r.ok()) return r;
    revert_small.push_back(Ms(start, Clock::now()));
  }
  fmt::print("snapshot: median {:.1f} ms; revert after one file: median {:.1f} ms; its change set: median {:.1f} ms\n",
             Median(snap), Median(revert_small), Median(changes_small));

  // Undo (`temper revert BATCH RULE`): three fixes as three snapshots, the middle one checked for
  // later overlaps and dropped; and the scratch view every evaluation reads.
  std::vector<double> scratch, overlaps, drop;
  for (int i = 0; i < reps; ++i) {
    auto start = Clock::now();
    if (auto v = t.snapshots().WithScratchView([](const std::string&) { return Status::OK(); }); !v.ok()) return v;
    scratch.push_back(Ms(start, Clock::now()));
    auto base = t.Snapshot();
    if (!base.ok()) return base.status();
    std::vector<SnapshotId> fixes;
    for (const char* file : {"/etc/issue.net", "/etc/profile.d/tmout.sh", "/etc/ssh/sshd_config.d/bench.conf"}) {
      if (auto w = t.WriteFile(file, "bench\n", 0644); !w.ok()) return w;
      auto s = t.Snapshot();
      if (!s.ok()) return s.status();
      fixes.push_back(*s);
    }
    start = Clock::now();
    auto o = t.OverlapsAbove(fixes[1]);
    if (!o.ok()) return o.status();
    overlaps.push_back(Ms(start, Clock::now()));
    start = Clock::now();
    if (auto d = t.DropSnapshot(fixes[1]); !d.ok()) return d;
    drop.push_back(Ms(start, Clock::now()));
    if (auto r = t.Revert(*base); !r.ok()) return r;
  }
  fmt::print(
      "scratch view (mount + unmount): median {:.1f} ms; undo one of three fixes: overlap check median "
      "{:.1f} ms, drop median {:.1f} ms\n",
      Median(scratch), Median(overlaps), Median(drop));
  // Parallel attempts: a fork per attempt, a one-file fix in each, committed in turn (the second
  // checked against the snapshot the first made since it was forked).
  std::vector<double> fork_ms, commit_ms;
  for (int i = 0; i < reps; ++i) {
    auto base = t.Snapshot();
    if (!base.ok()) return base.status();
    auto start = Clock::now();
    std::vector<std::unique_ptr<Target>> forks;
    for (const char* file : {"/etc/issue.net", "/etc/profile.d/tmout.sh"}) {
      start = Clock::now();
      auto fork = t.Fork();
      if (!fork.ok()) return fork.status();
      fork_ms.push_back(Ms(start, Clock::now()));
      if (auto w = (*fork)->WriteFile(file, "bench\n", 0644); !w.ok()) return w;
      forks.push_back(std::move(*fork));
    }
    for (auto& fork : forks) {
      start = Clock::now();
      if (auto c = t.CommitFork(*fork); !c.ok()) return c.status();
      commit_ms.push_back(Ms(start, Clock::now()));
    }
    forks.clear();
    if (auto r = t.Revert(*base); !r.ok()) return r;
  }
  fmt::print("fork (mount over the stack): median {:.1f} ms; commit of a one-file fork: median {:.1f} ms\n",
             Median(fork_ms), Median(commit_ms));
  for (int i = 0; i < std::min(reps, 3); ++i) {
    auto s = t.Snapshot();
    if (!s.ok()) return s.status();
    auto inst = t.Run("apt-get install -y -q apparmor chrony ufw vlock >/dev/null 2>&1", SandboxLimits{});
    if (!inst.ok()) return inst.status();
    auto changed = t.snapshots().ChangedPaths();
    auto start = Clock::now();
    auto changes = t.ChangesSinceSnapshot();
    if (!changes.ok()) return changes.status();
    double changes_ms = Ms(start, Clock::now());
    if (i == 0) {
      std::size_t diffs = 0;
      for (const FileChange& f : changes->files) diffs += f.diff.empty() ? 0 : 1;
      fmt::print("its change set: {:.0f} ms; {}; {} diffs; {:.1f} MB as JSON\n", changes_ms, changes->Summary(), diffs,
                 changes->ToJson().size() / 1e6);
    }
    start = Clock::now();
    if (auto r = t.Revert(*s); !r.ok()) return r;
    revert_large.push_back(Ms(start, Clock::now()));
    if (i == 0)
      fmt::print("large change: {} paths changed ({})\n", changed.ok() ? changed->size() : 0, inst->Describe());
  }
  fmt::print("revert after installing 4 packages: median {:.1f} ms\n", Median(revert_large));
  return Status::OK();
}

}  // namespace

int main(int argc, char** argv) {
  std::string rootfs_dir = "build/stig-rootfs";
  std::string work = "build/stig-bench";
  std::string baseline_out;
  std::string package_dir;
  std::vector<std::string> install = {"vlock", "aide"};
  bool install_only = false;
  int reps = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i];
    if (k == "--rootfs") rootfs_dir = argv[i + 1];
    else if (k == "--work") work = argv[i + 1];
    else if (k == "--reps") reps = std::max(1, std::atoi(argv[i + 1]));
    else if (k == "--baseline") baseline_out = argv[i + 1];
    else if (k == "--packages") package_dir = std::filesystem::absolute(argv[i + 1]).string();
    else if (k == "--install-only") install_only = std::string(argv[i + 1]) == "1";
    else if (k == "--install") {
      install.clear();
      std::string list = argv[i + 1];
      for (std::size_t at = 0; at <= list.size();) {
        std::size_t comma = std::min(list.find(',', at), list.size());
        if (comma > at) install.push_back(list.substr(at, comma - at));
        at = comma + 1;
      }
    } else {
      std::fprintf(stderr,
                   "usage: stig_bench [--rootfs DIR] [--work DIR] [--reps N] [--baseline OUT_DIR] "
                   "[--packages CACHE_DIR] [--install NAME[,NAME...]] [--install-only 1]\n");
      return 2;
    }
  }
  Logger log(LogLevel::kInfo);
  auto built = EnsureRootfs(rootfs_dir, RootfsSpec{}, log);
  if (!built.ok()) return Fail(built.status());
  auto t0 = Clock::now();
  auto content = Content::Load(kUbuntu2004Datastream, "stig");
  if (!content.ok()) return Fail(content.status());
  double load_ms = Ms(t0, Clock::now());
  Evaluator ev(*content, {.use_servers = true}, log);

  std::filesystem::remove_all(work);
  PackageCacheOptions packages;
  packages.dir = package_dir;
  auto target = RootfsTarget::Open("bench", work + "/target", built->root, packages);
  if (!target.ok()) return Fail(target.status());
  RootfsTarget& t = **target;
  fmt::print("rootfs: {} ({:.0f} MB of file data)\n", built->root, TreeBytes(built->root) / 1e6);
  fmt::print("content load (parent, metadata only): {:.0f} ms\n", load_ms);
  if (!package_dir.empty()) {
    // The first fetch downloads into the cache; then each install resolves again (the cache is
    // warm) and installs in the sandbox, and the target is reverted.
    for (const std::string& name : install) {
      auto a = Clock::now();
      auto first = t.PreparePackages({name});
      if (!first.ok()) return Fail(first.status());
      double fetch_ms = Ms(a, Clock::now());
      std::uint64_t bytes = 0;
      for (const auto& f : first->files) bytes += f.size;
      std::vector<double> prepare, total;
      std::size_t changed = 0;
      for (int i = 0; i < std::min(reps, 3); ++i) {
        auto s = t.Snapshot();
        if (!s.ok()) return Fail(s.status());
        a = Clock::now();
        auto warm = t.PreparePackages({name});
        if (!warm.ok()) return Fail(warm.status());
        prepare.push_back(Ms(a, Clock::now()));
        auto done = InstallPackages(t, {name}, SandboxLimits{std::chrono::minutes(30)});
        if (!done.ok()) return Fail(done.status());
        total.push_back(Ms(a, Clock::now()));
        changed = done->changed.size();
        if (auto r = t.Revert(*s); !r.ok()) return Fail(r);
      }
      fmt::print(
          "install {} ({} packages, {} files, {:.1f} MB): first fetch into the cache {:.0f} ms; "
          "resolve from the warm cache median {:.0f} ms; resolve + install median {:.0f} ms over {}\n",
          name, changed, first->files.size(), bytes / 1e6, fetch_ms, Median(prepare), Median(total), total.size());
    }
  }

  if (!install_only) {
    if (Status timed = TimeEvaluationAndSnapshots(t, ev, reps); !timed.ok()) return Fail(timed);
  }

  if (!baseline_out.empty()) {
    if (auto r = t.Revert(0); !r.ok()) return Fail(r);
    BaselineOptions opts;
    opts.output_dir = baseline_out;
    auto report = RunBaseline(t, ev, opts, log);
    if (!report.ok()) return Fail(report.status());
    fmt::print("\n{}", report->ToText());
    std::ofstream(baseline_out + "/report.json") << report->ToJson() << "\n";
  }
  target->reset();
  std::filesystem::remove_all(work);
  return 0;
}
