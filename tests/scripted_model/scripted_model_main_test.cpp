// temper-scripted-model as a process: a bad latency flag stops it before it listens, with exit status 2
// and an error naming the flag; a good one is announced in its log.
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

#include <catch2/catch.hpp>

using Catch::Contains;

namespace {

struct Run {
  int exit_status = -1;
  std::string output;  // stdout and stderr
};

// Runs the server with `args`; for a run that would serve, --listen :0 and `timeout 2` stop it.
Run RunServer(const std::string& args) {
  const std::string command = "timeout -s TERM 2 " + std::string(TEMPER_BINARY_DIR) +
                              "/tests/scripted_model/temper-scripted-model --listen 127.0.0.1:0 " + args + " 2>&1";
  Run run;
  FILE* pipe = popen(command.c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::array<char, 4096> buffer;
  while (size_t n = fread(buffer.data(), 1, buffer.size(), pipe)) run.output.append(buffer.data(), n);
  const int status = pclose(pipe);
  run.exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return run;
}

}  // namespace

TEST_CASE("temper-scripted-model: a bad latency flag is an error naming the flag, before it listens") {
  const std::pair<const char*, const char*> cases[] = {
      {"--decode-tok-s -3", "--decode-tok-s '-3': must be a positive number of tokens/s"},
      {"--prefill-tok-s 0", "--prefill-tok-s '0': must be a positive number of tokens/s"},
      {"--batch-curve 1:10,2:fast", "--batch-curve '1:10,2:fast': point 2 '2:fast' has no positive tokens/s"},
      {"--batch-curve 1:10,2:30", "--batch-curve '1:10,2:30': 2 streams at 30 tok/s in all is 15 tok/s each"},
      {"--simulate reference", "--simulate 'reference': is not a preset; known: reference-box"},
      {"--kv-tokens -5", "--kv-tokens '-5': must be 0 (unbounded) or more"},
      {"--no-pacing", "--no-pacing needs a latency model"},
  };
  for (const auto& [args, error] : cases) {
    INFO(args);
    const Run run = RunServer(args);
    CHECK(run.exit_status == 2);
    CHECK_THAT(run.output, Contains(error));
    CHECK_THAT(run.output, !Contains("http://"));
  }
  // Not a number at all: CLI11's own error names the flag.
  const Run nan = RunServer("--decode-tok-s fast");
  CHECK(nan.exit_status != 0);
  CHECK_THAT(nan.output, Contains("--decode-tok-s"));
}

TEST_CASE("temper-scripted-model: --simulate reference-box logs the model it simulates, and a summary when stopped") {
  const Run run = RunServer("--simulate reference-box --kv-tokens 0");
  CHECK_THAT(run.output,
             Contains("simulating model time: decode 1:14.9,2:29.1,4:55.4,8:101.1 tok/s (streams:aggregate), no "
                      "speculation, prefill "
                      "2300 tok/s, KV unbounded, max 8 sequences") &&
                 Contains("http://127.0.0.1:") &&
                 Contains("0 requests, 0 prompt tokens, 0 completion tokens; simulated model time: busy 0.0 s"));
}
