// OverlaySnapshots on a small hand-made base: stable ids, taking a layer out of the middle of the
// stack, what layers above hold of a layer's changes, and crashes between the steps of each
// operation (a step hook fails the operation there, the object is dropped as a killed process's
// would be, and a fresh Open must find the stack whole: as before the operation or as after it).
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <string>

#include <fmt/format.h>

#include "platform/host_disk.h"
#include "scratch_space.h"
#include "skip.h"
#include "small_tmpfs.h"
#include "stig/rootfs/overlay_snapshots.h"
#include "stig/tree_listing.h"

namespace temper::stig {
namespace {

namespace fs = std::filesystem;
using Listing = std::map<std::string, std::string>;

// A base root and a stack directory for one test case, removed at its end.
class Scratch {
 public:
  explicit Scratch(const std::string& name) : dir_(::temper::testing::TestScratchDir() + "/overlay-" + name) {
    fs::remove_all(dir_);
    fs::create_directories(base() + "/etc/ssh");
    fs::create_directories(base() + "/srv/data");
    Write(base() + "/etc/login.defs", "PASS_MAX_DAYS 99999\n");
    Write(base() + "/etc/issue", "Debian\n");
    Write(base() + "/etc/ssh/sshd_config", "PermitRootLogin yes\n");
    Write(base() + "/srv/data/file", "data\n");
  }
  ~Scratch() {
    snapshots_.reset();
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  std::string base() const { return dir_ + "/base"; }
  std::string stack() const { return dir_ + "/stack"; }
  OverlaySnapshots& Open(std::uint64_t disk_bytes = SandboxCaps{}.disk_bytes) {
    snapshots_.reset();
    auto opened = OverlaySnapshots::Open(stack(), base(), disk_bytes);
    INFO(opened.status().ToString());
    REQUIRE(opened.ok());
    snapshots_ = std::move(*opened);
    return *snapshots_;
  }
  // Drops the object without a clean close, as a killed process leaves things.
  void Crash() { snapshots_.reset(); }
  OverlaySnapshots& s() { return *snapshots_; }
  std::string At(const std::string& path) const { return snapshots_->merged() + path; }
  Listing Tree() const { return testing::TreeListing(snapshots_->merged()); }

  static void Write(const std::string& path, const std::string& text) {
    std::ofstream out(path, std::ios::trunc);
    out << text;
    REQUIRE(out.good());
  }

 private:
  std::string dir_;
  std::unique_ptr<OverlaySnapshots> snapshots_;
};

// Three snapshots over the base: 1 edits login.defs, 2 adds /etc/b and removes /etc/issue,
// 3 edits sshd_config. Returns the listing at each state (index 0: the base).
std::vector<Listing> ThreeLayers(Scratch& t) {
  std::vector<Listing> states{t.Tree()};
  Scratch::Write(t.At("/etc/login.defs"), "PASS_MAX_DAYS 60\n");
  REQUIRE(*t.s().Snapshot() == 1);
  states.push_back(t.Tree());
  Scratch::Write(t.At("/etc/b"), "B\n");
  fs::remove(t.At("/etc/issue"));
  REQUIRE(*t.s().Snapshot() == 2);
  states.push_back(t.Tree());
  Scratch::Write(t.At("/etc/ssh/sshd_config"), "PermitRootLogin no\n");
  REQUIRE(*t.s().Snapshot() == 3);
  states.push_back(t.Tree());
  return states;
}

// The listing of the base with only layers 1 and 3's changes: what dropping layer 2 must give.
Listing WithoutLayer2() {
  Scratch other("expected");
  OverlaySnapshots& o = other.Open();
  Scratch::Write(other.At("/etc/login.defs"), "PASS_MAX_DAYS 60\n");
  Scratch::Write(other.At("/etc/ssh/sshd_config"), "PermitRootLogin no\n");
  REQUIRE(o.Snapshot().ok());
  return other.Tree();
}

TEST_CASE("Snapshot ids grow, survive reopening and are never reused after a revert", "[stig][overlay]") {
  Scratch t("ids");
  OverlaySnapshots& s = t.Open();
  CHECK(s.top() == 0);
  REQUIRE(*s.Snapshot() == 1);
  REQUIRE(*s.Snapshot() == 2);
  REQUIRE(s.Revert(1).ok());
  CHECK(s.layer_ids() == std::vector<std::uint32_t>{1});
  CHECK(*s.Snapshot() == 3);  // not 2 again: a stored 2 must never name other changes
  OverlaySnapshots& reopened = t.Open();
  CHECK(reopened.layer_ids() == std::vector<std::uint32_t>{1, 3});
  CHECK(*reopened.Snapshot() == 4);
  REQUIRE(reopened.Revert(0).ok());
  CHECK(reopened.depth() == 0);
  CHECK(*t.Open().Snapshot() == 5);
  CHECK(t.s().Revert(6).code() == StatusCode::kOutOfRange);

  // last_layer lives on the target's disk image, mounted while the stack is open.
  Scratch::Write(t.stack() + "/disk/last_layer", "five\n");
  t.Crash();
  auto corrupt = OverlaySnapshots::Open(t.stack(), t.base());
  CHECK(corrupt.status().code() == StatusCode::kDataLoss);
  CHECK_THAT(corrupt.status().message(), Catch::Contains("last_layer") && Catch::Contains("five"));
}

TEST_CASE("A stack in the layout before disk images is moved into one, whole, at Open", "[stig][overlay]") {
  Scratch t("migrate");
  // As an older temperd left it: layers/1 edits login.defs and deletes /etc/issue (a whiteout),
  // the upper layer holds an unsnapshotted file, ids up to 3 were handed out.
  const std::string old = t.stack();
  fs::create_directories(old + "/layers/1/etc");
  fs::create_directories(old + "/upper/etc");
  fs::create_directories(old + "/upper/srv/data");
  Scratch::Write(old + "/layers/1/etc/login.defs", "PASS_MAX_DAYS 60\n");
  REQUIRE(::mknod((old + "/layers/1/etc/issue").c_str(), S_IFCHR | 0000, makedev(0, 0)) == 0);
  Scratch::Write(old + "/upper/etc/unsnapshotted", "x\n");
  // An opaque directory: the base's /srv/data/file is hidden by it.
  REQUIRE(::setxattr((old + "/upper/srv/data").c_str(), "trusted.overlay.opaque", "y", 1, 0) == 0);
  Scratch::Write(old + "/last_layer", "3\n");

  OverlaySnapshots& s = t.Open();
  CHECK(s.layer_ids() == std::vector<std::uint32_t>{1});
  {
    std::ifstream defs(t.At("/etc/login.defs"));  // closed before the next snapshot
    std::string line;
    std::getline(defs, line);
    CHECK(line == "PASS_MAX_DAYS 60");
  }
  CHECK_FALSE(fs::exists(t.At("/etc/issue")));
  CHECK(fs::exists(t.At("/etc/unsnapshotted")));
  CHECK_FALSE(fs::exists(t.At("/srv/data/file")));
  CHECK(fs::exists(t.At("/etc/ssh/sshd_config")));
  for (const char* gone : {"/layers", "/upper", "/work", "/last_layer"}) CHECK_FALSE(fs::exists(old + gone));
  auto next = s.Snapshot();
  INFO(next.status().ToString());
  REQUIRE(next.ok());
  CHECK(*next == 4);  // the ids handed out before are never reused
  CHECK(t.Open().layer_ids() == std::vector<std::uint32_t>{1, 4});
}

TEST_CASE("The disk image grows to a larger cap and keeps what it holds", "[stig][overlay]") {
  Scratch t("grow");
  OverlaySnapshots& small = t.Open(64 << 20);
  CHECK(small.disk_bytes() == 64 << 20);
  const std::uint64_t free_small = small.FreeBytes();
  Scratch::Write(t.At("/etc/kept"), "kept\n");
  OverlaySnapshots& large = t.Open(256 << 20);
  CHECK(large.disk_bytes() == 256 << 20);
  CHECK(large.FreeBytes() > free_small + (128 << 20));
  CHECK(fs::exists(t.At("/etc/kept")));
  // A smaller cap later applies to new targets only: this one keeps its image.
  CHECK(t.Open(64 << 20).disk_bytes() == 256 << 20);
}

TEST_CASE("DropLayer takes one snapshot's changes out of the middle and keeps the ids above", "[stig][overlay]") {
  Scratch t("drop");
  t.Open();
  std::vector<Listing> states = ThreeLayers(t);
  REQUIRE(states[2] != states[3]);
  Scratch::Write(t.At("/etc/unsnapshotted"), "x\n");

  REQUIRE(t.s().DropLayer(2).ok());
  CHECK(t.s().layer_ids() == std::vector<std::uint32_t>{1, 3});
  CHECK(t.Tree() == WithoutLayer2());  // /etc/b gone, /etc/issue back, 1 and 3 kept; upper dropped
  CHECK(fs::exists(t.At("/etc/issue")));
  CHECK_FALSE(fs::exists(t.At("/etc/b")));
  CHECK_FALSE(fs::exists(t.At("/etc/unsnapshotted")));
  CHECK(t.s().DropLayer(2).code() == StatusCode::kNotFound);

  // Reverting to the dropped id means the layers below it; to 3, everything that is left.
  REQUIRE(t.s().Revert(3).ok());
  CHECK(t.Tree() == WithoutLayer2());
  REQUIRE(t.s().Revert(2).ok());
  CHECK(t.s().layer_ids() == std::vector<std::uint32_t>{1});
  CHECK(t.Tree() == states[1]);
  CHECK(*t.s().Snapshot() == 4);
}

TEST_CASE("LayerChanges and OverlapsAbove tell real changes from copied-up parents", "[stig][overlay]") {
  Scratch t("overlap");
  OverlaySnapshots& s = t.Open();
  Scratch::Write(t.At("/etc/login.defs"), "PASS_MAX_DAYS 60\n");  // 1: a file in /etc
  REQUIRE(*s.Snapshot() == 1);
  Scratch::Write(t.At("/etc/ssh/sshd_config"), "PermitRootLogin no\n");  // 2: copies /etc up too
  REQUIRE(*s.Snapshot() == 2);
  fs::create_directories(t.At("/opt/new"));  // 3: a new directory
  Scratch::Write(t.At("/opt/new/one"), "1\n");
  REQUIRE(::chmod(t.At("/srv/data").c_str(), 0700) == 0);  // and a directory's mode
  REQUIRE(*s.Snapshot() == 3);

  CHECK(*s.LayerChanges(1) == std::vector<std::string>{"/etc/login.defs"});
  CHECK(*s.LayerChanges(2) == std::vector<std::string>{"/etc/ssh/sshd_config"});
  CHECK(*s.LayerChanges(3) == std::vector<std::string>{"/opt", "/opt/new", "/opt/new/one", "/srv/data"});
  CHECK(s.OverlapsAbove(1)->empty());  // layer 2 holds /etc, copied up unchanged: no conflict

  Scratch::Write(t.At("/etc/login.defs"), "PASS_MAX_DAYS 30\n");  // 4: rewrites layer 1's file
  Scratch::Write(t.At("/opt/new/two"), "2\n");                    // ... and writes in 3's new dir
  fs::remove(t.At("/srv/data/file"));                             // ... and in 3's chmodded one
  REQUIRE(*s.Snapshot() == 4);
  auto over1 = s.OverlapsAbove(1);
  REQUIRE(over1.ok());
  REQUIRE(over1->size() == 1);
  CHECK((*over1)[0].layer == 4);
  CHECK((*over1)[0].paths == std::vector<std::string>{"/etc/login.defs"});
  auto over3 = s.OverlapsAbove(3);
  REQUIRE(over3.ok());
  REQUIRE(over3->size() == 1);
  CHECK((*over3)[0].paths == std::vector<std::string>{"/opt", "/opt/new", "/srv/data"});
  CHECK(s.OverlapsAbove(2)->empty());
  CHECK(s.OverlapsAbove(7).status().code() == StatusCode::kNotFound);

  // A deletion is a change, and a whiteout above a file created below is an overlap.
  fs::remove(t.At("/etc/ssh/sshd_config"));
  REQUIRE(*s.Snapshot() == 5);
  CHECK(*s.LayerChanges(5) == std::vector<std::string>{"/etc/ssh/sshd_config"});
  auto over2 = s.OverlapsAbove(2);
  REQUIRE(over2.ok());
  REQUIRE(over2->size() == 1);
  CHECK((*over2)[0].layer == 5);
}

TEST_CASE("A crash at any step of DropLayer leaves the stack as before or as after it", "[stig][overlay][crash]") {
  struct Case {
    const char* step;
    bool dropped;  // whether the layer is out once the crash happened at this step
  };
  for (Case c :
       {Case{"unmount", false}, Case{"discard-layer", false}, Case{"reset-upper", true}, Case{"mount", true}}) {
    DYNAMIC_SECTION("crash before " << c.step) {
      Scratch t(std::string("crash-") + c.step);
      t.Open();
      std::vector<Listing> states = ThreeLayers(t);
      t.s().set_step_hook([&](std::string_view step) {
        return step == c.step ? Status::Aborted(fmt::format("simulated crash before {}", step)) : Status::OK();
      });
      Status dropped = t.s().DropLayer(2);
      CHECK(dropped.code() == StatusCode::kAborted);
      t.s().set_step_hook(nullptr);
      t.Crash();

      OverlaySnapshots& s = t.Open();
      if (c.dropped) {
        CHECK(s.layer_ids() == std::vector<std::uint32_t>{1, 3});
        CHECK(t.Tree() == WithoutLayer2());
      } else {
        CHECK(s.layer_ids() == std::vector<std::uint32_t>{1, 2, 3});
        CHECK(t.Tree() == states[3]);
        REQUIRE(s.DropLayer(2).ok());  // the operation, run again, completes
        CHECK(t.Tree() == WithoutLayer2());
      }
      CHECK(*s.Snapshot() == 4);
    }
  }
}

TEST_CASE("A crash during Revert or Snapshot leaves a whole stack", "[stig][overlay][crash]") {
  Scratch t("crash-revert");
  t.Open();
  std::vector<Listing> states = ThreeLayers(t);
  int discards = 0;
  t.s().set_step_hook([&](std::string_view step) {
    return step == "discard-layer" && ++discards == 2 ? Status::Aborted("simulated crash") : Status::OK();
  });
  CHECK(t.s().Revert(0).code() == StatusCode::kAborted);  // layer 3 is out, 2 and 1 are not
  t.s().set_step_hook(nullptr);
  t.Crash();
  CHECK(t.Open().layer_ids() == std::vector<std::uint32_t>{1, 2});
  CHECK(t.Tree() == states[2]);

  for (const char* step : {"record-id", "freeze-upper"}) {
    Scratch::Write(t.At("/etc/late"), step);
    Listing changed = t.Tree();
    t.s().set_step_hook([&](std::string_view s) { return s == step ? Status::Aborted("crash") : Status::OK(); });
    CHECK(t.s().Snapshot().status().code() == StatusCode::kAborted);
    t.s().set_step_hook(nullptr);
    t.Crash();
    OverlaySnapshots& s = t.Open();
    CHECK(s.layer_ids() == std::vector<std::uint32_t>{1, 2});  // the change is still unsnapshotted
    CHECK(t.Tree() == changed);
  }
  // The id the crash before freeze-upper had recorded (4) is skipped, never handed out twice.
  CHECK(*t.s().Snapshot() == 5);
}

TEST_CASE("A scratch view reads the current state and leaves no trace of what is written there", "[stig][overlay]") {
  Scratch t("scratch");
  OverlaySnapshots& s = t.Open();
  Scratch::Write(t.At("/etc/login.defs"), "PASS_MAX_DAYS 60\n");
  REQUIRE(*s.Snapshot() == 1);
  Scratch::Write(t.At("/etc/unsnapshotted"), "u\n");
  const Listing before = t.Tree();
  std::string seen;
  Status ran = s.WithScratchView([&](const std::string& root) {
    std::ifstream in(root + "/etc/login.defs");
    std::getline(in, seen);
    CHECK(fs::exists(root + "/etc/unsnapshotted"));
    Scratch::Write(root + "/etc/login.defs", "rewritten\n");
    Scratch::Write(root + "/var-cache-rebuilt", "x\n");
    fs::remove(root + "/etc/issue");
    return Status::OK();
  });
  REQUIRE(ran.ok());
  CHECK(seen == "PASS_MAX_DAYS 60");
  CHECK(t.Tree() == before);
  CHECK(*s.ChangedPaths() == std::vector<std::string>{"/etc", "/etc/unsnapshotted"});
  CHECK(s.WithScratchView([](const std::string&) { return Status::Aborted("the program failed"); }).code() ==
        StatusCode::kAborted);
  CHECK(t.Tree() == before);
  REQUIRE(*s.Snapshot() == 2);  // the target's own mount was never held busy
}

// ---- forks ----

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::unique_ptr<OverlayFork> MakeFork(OverlaySnapshots& s) {
  auto fork = s.Fork();
  INFO(fork.status().ToString());
  REQUIRE(fork.ok());
  return std::move(*fork);
}

TEST_CASE("Forks work beside each other and the main tree, and commit as snapshots on top, in order",
          "[stig][overlay][fork]") {
  Scratch t("forks");
  OverlaySnapshots& s = t.Open();
  Scratch::Write(t.At("/etc/login.defs"), "PASS_MAX_DAYS 60\n");
  REQUIRE(*s.Snapshot() == 1);
  const Listing at1 = t.Tree();

  auto a = MakeFork(s);
  auto b = MakeFork(s);
  CHECK(s.open_forks() == 2);
  CHECK(a->forked_from() == 1);
  CHECK(ReadText(a->merged() + "/etc/login.defs") == "PASS_MAX_DAYS 60\n");
  Scratch::Write(a->merged() + "/etc/a", "A\n");
  fs::remove(a->merged() + "/etc/issue");
  Scratch::Write(b->merged() + "/etc/ssh/sshd_config", "PermitRootLogin no\n");
  // Neither sees the other, and the main tree sees neither.
  CHECK_FALSE(fs::exists(b->merged() + "/etc/a"));
  CHECK(fs::exists(b->merged() + "/etc/issue"));
  CHECK(ReadText(a->merged() + "/etc/ssh/sshd_config") == "PermitRootLogin yes\n");
  CHECK(t.Tree() == at1);
  CHECK(*a->ChangedPaths() == std::vector<std::string>{"/etc", "/etc/a", "/etc/issue"});

  REQUIRE(*s.CommitFork(*a) == 2);
  CHECK(a->spent());
  CHECK(ReadText(t.At("/etc/a")) == "A\n");
  CHECK_FALSE(fs::exists(t.At("/etc/issue")));
  // b was made on snapshot 1; snapshot 2 changed nothing b changed, so b lands above it.
  REQUIRE(*s.CommitFork(*b) == 3);
  CHECK(ReadText(t.At("/etc/ssh/sshd_config")) == "PermitRootLogin no\n");
  CHECK(ReadText(t.At("/etc/a")) == "A\n");
  CHECK(s.layer_ids() == std::vector<std::uint32_t>{1, 2, 3});
  CHECK(*s.LayerChanges(3) == std::vector<std::string>{"/etc/ssh/sshd_config"});

  // The same end state as the serial loop's: one snapshot per fix, each revertible.
  a.reset();
  b.reset();
  CHECK(s.open_forks() == 0);
  REQUIRE(s.Revert(1).ok());
  CHECK(t.Tree() == at1);
}

TEST_CASE("A fork that changed a line a later snapshot changed otherwise is refused, naming it, changing nothing",
          "[stig][overlay][fork]") {
  Scratch t("fork-conflict");
  OverlaySnapshots& s = t.Open();
  Scratch::Write(t.At("/etc/login.defs"), "PASS_MAX_DAYS 99\n");
  REQUIRE(*s.Snapshot() == 1);
  auto a = MakeFork(s);
  auto b = MakeFork(s);
  Scratch::Write(a->merged() + "/etc/login.defs", "PASS_MAX_DAYS 60\n");
  Scratch::Write(b->merged() + "/etc/login.defs", "PASS_MAX_DAYS 30\n");
  Scratch::Write(b->merged() + "/etc/b-only", "B\n");
  REQUIRE(*s.CommitFork(*a) == 2);
  const Listing after_a = t.Tree();

  Result<std::uint32_t> refused = s.CommitFork(*b);
  CHECK(refused.status().code() == StatusCode::kAborted);
  CHECK_THAT(refused.status().message(), Catch::Contains("cannot be merged: /etc/login.defs"));
  CHECK(t.Tree() == after_a);
  CHECK(s.layer_ids() == std::vector<std::uint32_t>{1, 2});
  CHECK(b->spent());
  CHECK_FALSE(fs::exists(b->merged() + "/etc/b-only"));  // its tree is gone
  CHECK(s.CommitFork(*b).status().code() == StatusCode::kInvalidArgument);

  // Made again on the new snapshot, the same change commits.
  auto again = MakeFork(s);
  CHECK(again->forked_from() == 2);
  Scratch::Write(again->merged() + "/etc/login.defs", "PASS_MAX_DAYS 30\n");
  REQUIRE(*s.CommitFork(*again) == 3);
  CHECK(ReadText(t.At("/etc/login.defs")) == "PASS_MAX_DAYS 30\n");

  // A fork of another stack is not this one's to commit.
  Scratch other_scratch("fork-other");
  OverlaySnapshots& other = other_scratch.Open();
  auto foreign = MakeFork(other);
  CHECK(s.CommitFork(*foreign).status().code() == StatusCode::kInvalidArgument);
}

TEST_CASE("A fork whose text files a later snapshot changed elsewhere commits them merged line by line",
          "[stig][overlay][fork]") {
  Scratch t("fork-merge");
  OverlaySnapshots& s = t.Open();
  Scratch::Write(t.At("/etc/login.defs"), "PASS_MAX_DAYS 99\nPASS_MIN_DAYS 0\nUMASK 022\n");
  Scratch::Write(t.At("/etc/gone"), "G\n");
  REQUIRE(*s.Snapshot() == 1);
  auto a = MakeFork(s);
  auto b = MakeFork(s);
  auto c = MakeFork(s);
  // Two fixes of one file, different lines; two appends to a file neither root had.
  Scratch::Write(a->merged() + "/etc/login.defs", "PASS_MAX_DAYS 60\nPASS_MIN_DAYS 0\nUMASK 022\n");
  Scratch::Write(b->merged() + "/etc/login.defs", "PASS_MAX_DAYS 99\nPASS_MIN_DAYS 0\nUMASK 077\n");
  fs::create_directories(a->merged() + "/etc/audit/rules.d");
  fs::create_directories(b->merged() + "/etc/audit/rules.d");
  Scratch::Write(a->merged() + "/etc/audit/rules.d/temper.rules", "-w /etc/passwd -p wa\n");
  Scratch::Write(b->merged() + "/etc/audit/rules.d/temper.rules", "-w /etc/shadow -p wa\n");
  // A binary file and a deletion are not merged.
  Scratch::Write(a->merged() + "/etc/gone", std::string("A\0", 2));
  Scratch::Write(c->merged() + "/etc/gone", std::string("C\0", 2));
  REQUIRE(*s.CommitFork(*a) == 2);
  Result<std::uint32_t> merged = s.CommitFork(*b);
  INFO(merged.status().ToString());
  REQUIRE(merged.ok());
  CHECK(*merged == 3);
  CHECK(ReadText(t.At("/etc/login.defs")) == "PASS_MAX_DAYS 60\nPASS_MIN_DAYS 0\nUMASK 077\n");
  CHECK(ReadText(t.At("/etc/audit/rules.d/temper.rules")) == "-w /etc/passwd -p wa\n-w /etc/shadow -p wa\n");
  Result<std::uint32_t> binary = s.CommitFork(*c);
  CHECK(binary.status().code() == StatusCode::kAborted);
  CHECK_THAT(binary.status().message(), Catch::EndsWith("cannot be merged: /etc/gone"));
  auto d = MakeFork(s);
  auto e = MakeFork(s);
  Scratch::Write(d->merged() + "/etc/login.defs", "PASS_MAX_DAYS 60\nPASS_MIN_DAYS 1\nUMASK 077\n");
  fs::remove(e->merged() + "/etc/login.defs");
  REQUIRE(*s.CommitFork(*d) == 4);
  CHECK(s.CommitFork(*e).status().code() == StatusCode::kAborted);  // deleted what d changed
  // Each merged commit is one snapshot like any other: reverting it takes its lines out.
  for (auto* fork : {&a, &b, &c, &d, &e}) fork->reset();
  REQUIRE(s.Revert(2).ok());
  CHECK(ReadText(t.At("/etc/login.defs")) == "PASS_MAX_DAYS 60\nPASS_MIN_DAYS 0\nUMASK 022\n");
}

TEST_CASE("Layers an open fork reads stay, later ones may go, and a main tree with changes refuses a commit",
          "[stig][overlay][fork]") {
  Scratch t("fork-guards");
  OverlaySnapshots& s = t.Open();
  REQUIRE(*s.Snapshot() == 1);
  auto fork = MakeFork(s);
  Scratch::Write(fork->merged() + "/etc/from-fork", "F\n");
  CHECK(s.Revert(0).code() == StatusCode::kFailedPrecondition);
  const Status drop = s.DropLayer(1);
  CHECK(drop.code() == StatusCode::kFailedPrecondition);
  CHECK_THAT(drop.message(), Catch::Contains("fork 1 still reads snapshot 1"));
  // A layer the fork does not read may go while it is open.
  Scratch::Write(t.At("/etc/passing"), "P\n");
  REQUIRE(*s.Snapshot() == 2);
  REQUIRE(s.DropLayer(2).ok());
  CHECK_FALSE(fs::exists(t.At("/etc/passing")));

  Scratch::Write(t.At("/etc/on-main"), "M\n");
  Result<std::uint32_t> dirty = s.CommitFork(*fork);
  CHECK(dirty.status().code() == StatusCode::kFailedPrecondition);
  CHECK_THAT(dirty.status().message(), Catch::Contains("/etc"));
  CHECK_FALSE(fork->spent());   // refused before anything happened: it can commit later
  REQUIRE(*s.Snapshot() == 3);  // a snapshot only adds a layer: allowed
  REQUIRE(*s.CommitFork(*fork) == 4);
  CHECK(fs::exists(t.At("/etc/on-main")));
  CHECK(fs::exists(t.At("/etc/from-fork")));
  fork.reset();
  REQUIRE(s.DropLayer(3).ok());
  CHECK_FALSE(fs::exists(t.At("/etc/on-main")));
  CHECK(fs::exists(t.At("/etc/from-fork")));
}

TEST_CASE("What forks of a killed owner left is gone at the next Open, and the stack is whole",
          "[stig][overlay][fork][crash]") {
  Scratch t("fork-crash");
  {
    OverlaySnapshots& s = t.Open();
    Scratch::Write(t.At("/etc/login.defs"), "PASS_MAX_DAYS 60\n");
    REQUIRE(*s.Snapshot() == 1);
  }
  const std::string stack = t.stack();
  const std::string base = t.base();
  t.Crash();  // closes: the child below must be able to take the lock
  // The owner: makes two forks, writes in them, and dies without any clean-up (no destructor
  // runs after _exit), its fork trees still mounted.
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    auto s = OverlaySnapshots::Open(stack, base);
    if (!s.ok()) ::_exit(2);
    auto f1 = (*s)->Fork();
    auto f2 = (*s)->Fork();
    if (!f1.ok() || !f2.ok()) ::_exit(3);
    std::ofstream((*f1)->merged() + "/etc/half-done") << "x";
    std::ofstream((*f2)->merged() + "/etc/other") << "y";
    ::_exit(0);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  CHECK(fs::exists(stack + "/forks/1/merged/etc/half-done"));  // left mounted

  OverlaySnapshots& s = t.Open();
  CHECK(s.layer_ids() == std::vector<std::uint32_t>{1});
  CHECK(s.open_forks() == 0);
  CHECK_FALSE(fs::exists(stack + "/forks/1/merged/etc/half-done"));
  CHECK_FALSE(fs::exists(t.At("/etc/half-done")));
  CHECK(ReadText(t.At("/etc/login.defs")) == "PASS_MAX_DAYS 60\n");
  auto fork = MakeFork(s);  // numbering starts afresh, over whatever the dead owner left
  CHECK(fork->number() == 1);
  CHECK_FALSE(fs::exists(fork->merged() + "/etc/half-done"));
  CHECK_FALSE(fs::exists(fork->merged() + "/etc/other"));
}

TEST_CASE("A fork's scratch view reads the fork and leaves no trace in it", "[stig][overlay][fork]") {
  Scratch t("fork-scratch");
  OverlaySnapshots& s = t.Open();
  auto fork = MakeFork(s);
  Scratch::Write(fork->merged() + "/etc/login.defs", "PASS_MAX_DAYS 60\n");
  std::string seen;
  REQUIRE(fork->WithScratchView([&](const std::string& root) {
                seen = ReadText(root + "/etc/login.defs");
                Scratch::Write(root + "/var-cache-rebuilt", "x\n");
                return Status::OK();
              })
              .ok());
  CHECK(seen == "PASS_MAX_DAYS 60\n");
  CHECK(*fork->ChangedPaths() == std::vector<std::string>{"/etc", "/etc/login.defs"});
  REQUIRE(*s.CommitFork(*fork) == 1);
  CHECK_FALSE(fs::exists(t.At("/var-cache-rebuilt")));
}

// The host file system of these cases: a tmpfs of 1.5 GiB, of which the state store's reserve
// (max(1 GiB, 5%): 1 GiB) leaves 512 MiB to promise to disk images.
constexpr std::uint64_t kSmallHostBytes = std::uint64_t{3} << 29;

TEST_CASE("A disk image larger than the host's free space less the reserve is refused, naming both",
          "[stig][overlay][disk]") {
  Scratch t("host-too-small");
  ::temper::testing::SmallTmpfs host(t.stack() + "-host", kSmallHostBytes);
  if (!host.mounted()) TEMPER_SKIP(host.error());
  const std::string stack = host.path() + "/stack";
  auto opened = OverlaySnapshots::Open(stack, t.base(), SandboxCaps{}.disk_bytes);
  REQUIRE_FALSE(opened.ok());
  CHECK(opened.status().code() == StatusCode::kResourceExhausted);
  const std::string message = opened.status().message();
  INFO(message);
  CHECK_THAT(message, Catch::Contains("layers.img of 8 GiB"));
  CHECK_THAT(message, Catch::Contains("the file system holding " + stack));
  CHECK_THAT(message, Catch::Contains("of 1.5 GiB, 1 GiB kept free for temperd's state store"));
  // Nothing of the refused image is left behind to take the host's space.
  CHECK_FALSE(fs::exists(stack + "/layers.img"));
  CHECK_FALSE(fs::exists(stack + "/layers.img.new"));

  // What fits beside the reserve is made, and grows only as far as the host allows.
  auto fits = OverlaySnapshots::Open(stack, t.base(), 256 << 20);
  INFO(fits.status().ToString());
  REQUIRE(fits.ok());
  (*fits).reset();
  auto grown = OverlaySnapshots::Open(stack, t.base(), 1 << 30);
  REQUIRE_FALSE(grown.ok());
  CHECK(grown.status().code() == StatusCode::kResourceExhausted);
  CHECK(fs::file_size(stack + "/layers.img") == 256 << 20);
}

TEST_CASE("Two disk images are never promised the same free space", "[stig][overlay][disk]") {
  Scratch t("host-shared");
  ::temper::testing::SmallTmpfs host(t.stack() + "-host", kSmallHostBytes);
  if (!host.mounted()) TEMPER_SKIP(host.error());
  // Each fits alone (300 MiB of the 512 MiB the reserve leaves); both together do not.
  auto first = OverlaySnapshots::Open(host.path() + "/a", t.base(), 300 << 20);
  INFO(first.status().ToString());
  REQUIRE(first.ok());
  auto second = OverlaySnapshots::Open(host.path() + "/b", t.base(), 300 << 20);
  REQUIRE_FALSE(second.ok());
  INFO(second.status().message());
  CHECK_THAT(second.status().message(),
             Catch::Contains("already promised to the disk images of other targets open in this process"));
  (*first).reset();  // its promise ends with it
  auto again = OverlaySnapshots::Open(host.path() + "/b", t.base(), 300 << 20);
  INFO(again.status().ToString());
  CHECK(again.ok());
}

TEST_CASE("The host reserve is a twentieth of the file system, at least 1 GiB", "[stig][overlay][disk]") {
  CHECK(HostReserveBytes(std::uint64_t{4} << 30) == std::uint64_t{1} << 30);
  CHECK(HostReserveBytes(std::uint64_t{100} << 30) == std::uint64_t{5} << 30);
}

}  // namespace
}  // namespace temper::stig
