// temper-lm, the binary, on a GGUF: convert writes a directory, and every command that takes a
// model directory takes the .gguf itself with the same results.
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>

#include <fmt/format.h>
#include <catch2/catch.hpp>

#include "engine/model/safetensors.h"
#include "engine/temp_dir.h"

namespace temper::engine::testing {
namespace {

struct Run {
  int exit_code;
  std::string output;  // stdout and stderr
};

Run TemperLm(const std::string& args) {
  const std::string cmd = std::string(TEMPER_BINARY_DIR) + "/engine/tools/temper-lm " + args + " 2>&1";
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

std::string Logits(const std::string& path) {
  Result<SafetensorsFile> file = SafetensorsFile::Open(path);
  REQUIRE(file.ok());
  const TensorInfo* logits = file->Find("logits");
  REQUIRE(logits != nullptr);
  const auto bytes = file->Data(*logits);
  return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

TEST_CASE("temper-lm takes a Gemma 3 GGUF wherever it takes a model directory, and converts it", "[gguf]") {
  TempDir tmp;
  const std::string gguf = std::string(TEMPER_TEST_DATA_DIR) + "/gguf/gemma3-tiny.gguf";
  const std::string dir = (tmp.path() / "tiny").string();
  Run convert = TemperLm(fmt::format("convert {} {}", gguf, dir));
  INFO(convert.output);
  REQUIRE(convert.exit_code == 0);

  const std::string a = (tmp.path() / "a.safetensors").string(), b = (tmp.path() / "b.safetensors").string();
  REQUIRE(TemperLm(fmt::format("logits --model {} --ids 2,279,285 --out {}", gguf, a)).exit_code == 0);
  REQUIRE(TemperLm(fmt::format("logits --model {} --ids 2,279,285 --out {}", dir, b)).exit_code == 0);
  CHECK(Logits(a) == Logits(b));

  Run from_gguf = TemperLm(fmt::format("generate --model {} --prompt 'hello world' --max-new 4 --greedy", gguf));
  Run from_dir = TemperLm(fmt::format("generate --model {} --prompt 'hello world' --max-new 4 --greedy", dir));
  INFO(from_gguf.output);
  REQUIRE(from_gguf.exit_code == 0);
  REQUIRE(from_dir.exit_code == 0);
  // The ids and their text; the timing line ("temper-lm: prefill ...") differs from run to run.
  auto ids_and_text = [](const std::string& out) {
    std::string kept;
    for (size_t begin = 0; begin < out.size();) {
      const size_t end = std::min(out.find('\n', begin), out.size());
      const std::string line = out.substr(begin, end - begin);
      if (!line.starts_with("temper-lm: ")) kept += line + "\n";
      begin = end + 1;
    }
    return kept;
  };
  CHECK(ids_and_text(from_gguf.output).size() > 10);
  CHECK(ids_and_text(from_gguf.output) == ids_and_text(from_dir.output));

  // encode and decode take the .gguf as the tokenizer file.
  const std::string text = tmp.Write("text", "hello world\n").string();
  const std::string ids = tmp.Write("ids", "[2,279,285]").string();
  Run encoded = TemperLm(fmt::format("encode --tokenizer {} --add-special-tokens < {}", gguf, text));
  CHECK(encoded.output == "[2,279,285,8]\n");  // "\n" is a user-defined piece of the tiny vocabulary
  Run decoded = TemperLm(fmt::format("decode --tokenizer {} < {}", gguf, ids));
  CHECK(decoded.output == "<bos>hello world");

  Run again = TemperLm(fmt::format("convert {} {}", gguf, dir));
  CHECK(again.exit_code == 1);
  CHECK_THAT(again.output, Catch::Matchers::Contains("is not empty"));
}

}  // namespace
}  // namespace temper::engine::testing
