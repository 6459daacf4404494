// temper-lm, run as a real process: `logits` writes the golden logits and hidden states (through
// tp = 2), `generate` prints the golden greedy tokens, and bad input exits non-zero with a message.
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <string>

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "golden_fixture.h"
#include "temp_dir.h"

namespace temper::engine::testing {
namespace {

struct Run {
  int exit_code;
  std::string output;  // stdout, and stderr when asked
};

Run TemperLm(const std::string& args, bool with_stderr = true) {
  const std::string cmd =
      std::string(TEMPER_BINARY_DIR) + "/engine/tools/temper-lm " + args + (with_stderr ? " 2>&1" : " 2>/dev/null");
  FILE* p = ::popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  Run r{0, {}};
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
  const int status = ::pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

TEST_CASE("temper-lm logits writes the golden logits and hidden states", "[engine][temper-lm]") {
  TempDir dir;
  const std::vector<int32_t> ids = Reference<int32_t>("input_ids_1");
  const std::string out = (dir.path() / "out.safetensors").string();
  Run r = TemperLm(fmt::format("logits --model {} --ids {} --tp 2 --out {}", TinyDir().string(), fmt::join(ids, ","), out));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  auto file = SafetensorsFile::Open(out);
  REQUIRE(file.ok());
  const TensorInfo* logits = file->Find("logits");
  const TensorInfo* hidden = file->Find("hidden");
  REQUIRE((logits && hidden));
  CHECK(logits->shape == std::vector<int64_t>{13, 512});
  CHECK(hidden->shape == std::vector<int64_t>{9, 13, 128});
  std::vector<float> got(static_cast<size_t>(logits->NumElements())), got_h(static_cast<size_t>(hidden->NumElements()));
  std::memcpy(got.data(), file->Data(*logits).data(), got.size() * 4);
  std::memcpy(got_h.data(), file->Data(*hidden).data(), got_h.size() * 4);
  const std::vector<float> ref = Reference<float>("logits_1"), ref_h = Reference<float>("hidden_1");
  CHECK(MaxAbsDiff(got.data(), ref.data(), ref.size()) <= 1e-3f);
  CHECK(MaxAbsDiff(got_h.data(), ref_h.data(), ref_h.size()) / MaxAbs(ref_h.data(), ref_h.size()) <= 1e-4f);
}

TEST_CASE("temper-lm generate prints the golden greedy tokens", "[engine][temper-lm]") {
  const std::vector<int32_t> ids = Reference<int32_t>("input_ids_0");
  const std::vector<int32_t> greedy = Reference<int32_t>("greedy_0");
  Run r = TemperLm(fmt::format("generate --model {} --ids {} --max-new 16 --greedy", TinyDir().string(), fmt::join(ids, ",")),
                   /*with_stderr=*/false);
  REQUIRE(r.exit_code == 0);
  CHECK(r.output == fmt::format("{}\n", fmt::join(greedy, ",")));
}

TEST_CASE("temper-lm generate is reproducible with a seed", "[engine][temper-lm]") {
  const std::string args = fmt::format("generate --model {} --ids 5,6,7 --max-new 12 --temperature 1.5 --seed 9 --ignore-eos",
                                       TinyDir().string());
  Run a = TemperLm(args, false), b = TemperLm(args, false);
  REQUIRE(a.exit_code == 0);
  CHECK(std::count(a.output.begin(), a.output.end(), ',') == 11);
  CHECK(a.output == b.output);
}

TEST_CASE("temper-lm reports bad input and exits non-zero", "[engine][temper-lm]") {
  Run missing = TemperLm("generate --model /nonexistent --ids 1 --max-new 2");
  CHECK(missing.exit_code == 1);
  CHECK(missing.output.find("/nonexistent/config.json") != std::string::npos);
  Run bad_ids = TemperLm(fmt::format("logits --model {} --ids 1,,2 --out /dev/null", TinyDir().string()));
  CHECK(bad_ids.exit_code == 1);
  CHECK(bad_ids.output.find("--ids") != std::string::npos);
  Run out_of_vocab = TemperLm(fmt::format("generate --model {} --ids 600 --max-new 2", TinyDir().string()));
  CHECK(out_of_vocab.exit_code == 1);
  CHECK(out_of_vocab.output.find("outside the vocabulary") != std::string::npos);
  Run bad_tp = TemperLm(fmt::format("generate --model {} --ids 5 --max-new 2 --tp 3", TinyDir().string()));
  CHECK(bad_tp.exit_code == 1);
  CHECK(bad_tp.output.find("tp 3") != std::string::npos);
  CHECK(TemperLm("frobnicate").exit_code != 0);
}

TEST_CASE("temper-lm runs synthetic weights of a config", "[engine][temper-lm]") {
  Run r = TemperLm(fmt::format("generate --synthetic {}/config.json --ids 1,2,3 --max-new 3 --ignore-eos", TinyDir().string()));
  INFO(r.output);
  CHECK(r.exit_code == 0);
}

}  // namespace
}  // namespace temper::engine::testing
