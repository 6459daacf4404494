#include "stig/line_merge.h"

#include <catch2/catch.hpp>

namespace temper::stig {
namespace {

TEST_CASE("line merge: each side's change where only it changed, once where both changed alike", "[stig][merge]") {
  const std::string base = "a\nb\nc\nd\n";
  CHECK(MergeLines(base, base, base) == base);
  CHECK(MergeLines(base, "A\nb\nc\nd\n", "a\nb\nc\nD\n") == "A\nb\nc\nD\n");
  CHECK(MergeLines(base, "a\nb\nc\nd\n", "a\nc\nd\n") == "a\nc\nd\n");        // theirs deleted a line
  CHECK(MergeLines(base, "a\nB\nc\nd\n", "a\nB\nc\nd\n") == "a\nB\nc\nd\n");  // the same change twice
  CHECK(MergeLines(base, "a\nb\nx\nc\nd\n", "a\nb\nc\nd\ny\n") == "a\nb\nx\nc\nd\ny\n");
  // A last line without a newline stays as each side left it.
  CHECK(MergeLines("k = 1", "k = 1\nz = 2", "k = 1") == "k = 1\nz = 2");
}

TEST_CASE("line merge: both adding at one place keeps both, the committed side's first", "[stig][merge]") {
  CHECK(MergeLines("", "-w /etc/passwd -p wa\n", "-w /etc/shadow -p wa\n") ==
        "-w /etc/shadow -p wa\n-w /etc/passwd -p wa\n");
  CHECK(MergeLines("# rules\n", "# rules\n-a ours\n", "# rules\n-a theirs\n") == "# rules\n-a theirs\n-a ours\n");
}

TEST_CASE("line merge: the same lines changed two ways, binary text and oversized text are not merged",
          "[stig][merge]") {
  CHECK_FALSE(MergeLines("PASS_MAX_DAYS 99\n", "PASS_MAX_DAYS 60\n", "PASS_MAX_DAYS 30\n").has_value());
  CHECK_FALSE(MergeLines("a\nb\n", "a\n", "a\nB\n").has_value());  // deleted here, changed there
  CHECK_FALSE(MergeLines("a\n", std::string("a\0", 2), "a\nb\n").has_value());
  const std::string big(kMaxMergeBytes + 1, 'x');
  CHECK_FALSE(MergeLines(big, big, big).has_value());
}

}  // namespace
}  // namespace temper::stig
