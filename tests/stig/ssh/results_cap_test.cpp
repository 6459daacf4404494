// The results files an SSH host sends back are read under a cap (kMaxResultsFileBytes): a hostile
// host that answers with more than its own stat said, or an honest one whose file is too large,
// costs temperd at most the cap in memory, and the error names the file and the cap. The "host"
// here is this machine, reached through a RemoteShell that runs the commands as real processes,
// so the bytes come through a real pipe as they come from ssh.
#include <sys/resource.h>

#include <fstream>
#include <string>

#include <fmt/format.h>
#include <catch2/catch.hpp>

#include "platform/process.h"
#include "scratch_space.h"
#include "stig/ssh/remote_oscap.h"
#include "stig/ssh/remote_shell.h"

namespace temper::stig {
namespace {

// Runs each command here, as ssh would run it on the host; `answer`, when set, is run instead of
// every command (a hostile host answers what it likes).
class LocalShell final : public RemoteShell {
 public:
  explicit LocalShell(std::vector<std::string> answer = {}) : answer_(std::move(answer)) {}
  const std::string& host_name() const override { return name_; }
  Result<ProcessResult> Exec(const std::vector<std::string>& argv, std::string_view stdin_data,
                             const SandboxLimits& limits) override {
    ProcessSpec spec;
    spec.argv = answer_.empty() ? argv : answer_;
    spec.stdin_data = std::string(stdin_data);
    spec.timeout = limits.timeout;
    spec.max_output_bytes = limits.max_output_bytes;
    return RunProcess(spec);
  }

 private:
  std::vector<std::string> answer_;
  std::string name_ = "root@hostile:22";
};

// This process's peak resident memory so far, in bytes.
std::uint64_t PeakRss() {
  struct rusage usage {};
  ::getrusage(RUSAGE_SELF, &usage);
  return static_cast<std::uint64_t>(usage.ru_maxrss) * 1024;
}

TEST_CASE("A host that streams more than the results cap costs at most the cap, and the error names it",
          "[stig][ssh][results_cap]") {
  // Four times the cap, whatever the host's stat said about the file.
  LocalShell hostile({"head", "-c", std::to_string(4 * kMaxResultsFileBytes), "/dev/zero"});
  const std::uint64_t peak_before = PeakRss();
  Result<std::string> read = RemoteReadFile(hostile, "/var/lib/temper/eval/run.1/arf.xml", kMaxResultsFileBytes);
  const std::uint64_t grew = PeakRss() > peak_before ? PeakRss() - peak_before : 0;
  REQUIRE_FALSE(read.ok());
  CHECK(read.status().code() == StatusCode::kOutOfRange);
  CHECK_THAT(read.status().message(), Catch::Contains("/var/lib/temper/eval/run.1/arf.xml on root@hostile:22"));
  CHECK_THAT(read.status().message(), Catch::Contains(fmt::format("the {} bytes allowed", kMaxResultsFileBytes)));
  // The cap plus the pipe's buffers and the string's growth, not the 256 MiB sent.
  INFO("peak memory grew by " << (grew >> 20) << " MiB");
  CHECK(grew < 2 * kMaxResultsFileBytes + (std::uint64_t{16} << 20));
}

TEST_CASE("An honest host's results file over the cap is refused by its size before it is sent",
          "[stig][ssh][results_cap]") {
  testing::ScratchPath file("results-cap-arf.xml");
  {
    std::ofstream out(file.path(), std::ios::binary);
    out.seekp(static_cast<std::streamoff>(kMaxResultsFileBytes + 1));
    out.put('x');  // sparse: the size is what matters
  }
  LocalShell host;
  Result<std::string> read = RemoteReadFile(host, file.path(), kMaxResultsFileBytes);
  REQUIRE_FALSE(read.ok());
  CHECK(read.status().code() == StatusCode::kOutOfRange);
  CHECK_THAT(read.status().message(),
             Catch::Contains(fmt::format("{} on root@hostile:22 is {} bytes", file.path(), kMaxResultsFileBytes + 2)));
  // Under the cap it is read whole.
  std::ofstream(file.path(), std::ios::trunc) << "<arf/>";
  read = RemoteReadFile(host, file.path(), kMaxResultsFileBytes);
  REQUIRE(read.ok());
  CHECK(*read == "<arf/>");
}

}  // namespace
}  // namespace temper::stig
