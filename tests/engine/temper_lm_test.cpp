// temper-lm, run as a real process: `logits` writes the golden logits and hidden states (through
// tp = 2), `generate` prints the golden greedy tokens, `encode`/`decode` match the tokenizer
// library, `generate --prompt` tokenizes, and bad input exits non-zero with a message.
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "engine/tokenizer/chat_format.h"
#include "engine/tokenizer/tokenizer.h"
#include "golden_fixture.h"
#include "gzip_file.h"
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
  Run r =
      TemperLm(fmt::format("logits --model {} --ids {} --tp 2 --out {}", TinyDir().string(), fmt::join(ids, ","), out));
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
  Run r = TemperLm(
      fmt::format("generate --model {} --ids {} --max-new 16 --greedy", TinyDir().string(), fmt::join(ids, ",")),
      /*with_stderr=*/false);
  REQUIRE(r.exit_code == 0);
  CHECK(r.output == fmt::format("{}\n", fmt::join(greedy, ",")));
}

TEST_CASE("temper-lm generate is reproducible with a seed", "[engine][temper-lm]") {
  const std::string args = fmt::format(
      "generate --model {} --ids 5,6,7 --max-new 12 --temperature 1.5 --seed 9 --ignore-eos", TinyDir().string());
  Run a = TemperLm(args, false), b = TemperLm(args, false);
  REQUIRE(a.exit_code == 0);
  CHECK(std::count(a.output.begin(), a.output.end(), ',') == 11);
  CHECK(a.output == b.output);
}

TEST_CASE("temper-lm reports bad input and exits non-zero", "[engine][temper-lm]") {
  Run missing = TemperLm("generate --model /nonexistent --ids 1 --max-new 2");
  CHECK(missing.exit_code == 1);
  CHECK(missing.output.find("model directory /nonexistent does not exist") != std::string::npos);
  TempDir empty;
  Run no_config = TemperLm(fmt::format("generate --model {} --ids 1 --max-new 2", empty.path().string()));
  CHECK(no_config.exit_code == 1);
  CHECK(no_config.output.find((empty.path() / "config.json").string()) != std::string::npos);
  Run bad_ids = TemperLm(fmt::format("logits --model {} --ids 1,,2 --out /dev/null", TinyDir().string()));
  CHECK(bad_ids.exit_code == 1);
  CHECK(bad_ids.output.find("--ids") != std::string::npos);
  Run out_of_vocab = TemperLm(fmt::format("generate --model {} --ids 600 --max-new 2", TinyDir().string()));
  CHECK(out_of_vocab.exit_code == 1);
  CHECK(out_of_vocab.output.find("outside the vocabulary") != std::string::npos);
  Run bad_tp = TemperLm(fmt::format("generate --model {} --ids 5 --max-new 2 --tp 3", TinyDir().string()));
  CHECK(bad_tp.exit_code == 1);
  CHECK(bad_tp.output.find("tp 3") != std::string::npos);
  Run bad_history = TemperLm(fmt::format("serve --model {} --port 0 --history-tokens -5", TinyDir().string()));
  CHECK(bad_history.exit_code != 0);
  CHECK(bad_history.output.find("--history-tokens") != std::string::npos);
  CHECK(TemperLm("frobnicate").exit_code != 0);
}

TEST_CASE("temper-lm serve refuses an API key file it cannot use, naming it, and never prints a key",
          "[engine][temper-lm]") {
  TempDir dir;
  const std::string empty = dir.Write("empty-key", "\n").string();
  Run blank = TemperLm(fmt::format("serve --model {} --port 0 --api-key-file {}", TinyDir().string(), empty));
  CHECK(blank.exit_code == 1);
  CHECK(blank.output.find("--api-key-file " + empty + ": the file holds no key") != std::string::npos);
  Run missing = TemperLm(
      fmt::format("serve --model {} --port 0 --api-key-file {}/none", TinyDir().string(), dir.path().string()));
  CHECK(missing.exit_code == 1);
  CHECK(missing.output.find("--api-key-file " + dir.path().string() + "/none") != std::string::npos);
  Run both =
      TemperLm(fmt::format("serve --model {} --port 0 --api-key sk-1 --api-key-file {}", TinyDir().string(), empty));
  CHECK(both.exit_code != 0);
  CHECK(both.output.find("sk-1") == std::string::npos);
}

TEST_CASE("temper-lm runs synthetic weights of a config", "[engine][temper-lm]") {
  Run r = TemperLm(
      fmt::format("generate --synthetic {}/config.json --ids 1,2,3 --max-new 3 --ignore-eos", TinyDir().string()));
  INFO(r.output);
  CHECK(r.exit_code == 0);
}

TEST_CASE("temper-lm synthesize writes a model directory that loads like a checkpoint and runs as --synthetic does",
          "[engine][temper-lm]") {
  TempDir dir;
  const std::string out = (dir.path() / "model").string();
  const std::string tokenizer = std::string(TEMPER_TEST_DATA_DIR) + "/tokenizer/gemma4-chat-tiny-tokenizer.json";
  Run made = TemperLm(fmt::format("synthesize --config {}/config.json --seed 5 --tokenizer {} --out {}",
                                  TinyDir().string(), tokenizer, out));
  INFO(made.output);
  REQUIRE(made.exit_code == 0);
  for (const char* name : {"config.json", "model.safetensors", "tokenizer.json"}) {
    CHECK(std::filesystem::exists(dir.path() / "model" / name));
  }
  // Same weights: the directory generates what the seeded synthetic source generates.
  Run loaded = TemperLm(fmt::format("generate --model {} --ids 2,10,20 --max-new 6 --ignore-eos", out), false);
  Run synthetic = TemperLm(fmt::format("generate --synthetic {}/config.json --weights-seed 5 --ids 2,10,20 --max-new 6 "
                                       "--ignore-eos",
                                       TinyDir().string()),
                           false);
  REQUIRE(loaded.exit_code == 0);
  CHECK(loaded.output == synthetic.output);
  // A model already there is never overwritten; a tokenizer larger than the vocabulary is refused.
  Run again = TemperLm(fmt::format("synthesize --config {}/config.json --out {}", TinyDir().string(), out));
  CHECK(again.exit_code != 0);
  CHECK_THAT(again.output, Catch::Contains("already holds config.json"));
  Result<std::string> gemma3 = ReadGzipFile(std::string(TEMPER_TEST_DATA_DIR) + "/tokenizer/gemma3-tokenizer.json.gz");
  REQUIRE(gemma3.ok());
  const std::string big = dir.Write("gemma3-tokenizer.json", *gemma3).string();
  Run misfit = TemperLm(fmt::format("synthesize --config {}/config.json --tokenizer {} --out {}/other",
                                    TinyDir().string(), big, dir.path().string()));
  CHECK(misfit.exit_code != 0);
  CHECK_THAT(misfit.output, Catch::Contains("vocabulary"));
  CHECK_FALSE(std::filesystem::exists(dir.path() / "other" / "model.safetensors"));
}

// The chat-format test tokenizer (378 ids, Gemma 4's control tokens).
std::string ChatTokenizerPath() {
  return std::string(TEMPER_TEST_DATA_DIR) + "/tokenizer/gemma4-chat-test-tokenizer.json";
}

Tokenizer LoadTokenizer(const std::string& path) {
  Result<Tokenizer> tok = Tokenizer::FromFile(path);
  if (!tok.ok()) FAIL(tok.status().ToString());
  return std::move(tok).value();
}

// The test tokenizer padded with placeholder tokens up to the tiny model's 512 ids, so that every
// id the model can generate decodes.
std::filesystem::path TinyCompatibleTokenizer(const TempDir& dir) {
  std::ifstream in(ChatTokenizerPath());
  nlohmann::json j = nlohmann::json::parse(in);
  for (int id = static_cast<int>(j["model"]["vocab"].size()); id < 512; ++id) {
    j["model"]["vocab"][fmt::format("<pad{}>", id)] = id;
  }
  return dir.Write("tokenizer.json", j.dump());
}

TEST_CASE("temper-lm encode and decode match the tokenizer library", "[engine][temper-lm]") {
  TempDir dir;
  const Tokenizer tok = LoadTokenizer(ChatTokenizerPath());
  const std::string text = "user model\n\nthe <turn|>\xE2\x82\xAC";
  const std::vector<int32_t> ids = tok.Encode(text);
  const auto text_file = dir.Write("text.txt", text);

  Run enc = TemperLm(fmt::format("encode --tokenizer {} < {}", ChatTokenizerPath(), text_file.string()), false);
  REQUIRE(enc.exit_code == 0);
  CHECK(enc.output == fmt::format("[{}]\n", fmt::join(ids, ",")));
  Run bos = TemperLm(
      fmt::format("encode --tokenizer {} --add-special-tokens < {}", ChatTokenizerPath(), text_file.string()), false);
  CHECK(bos.output == fmt::format("[{},{}]\n", tok.RequireToken("<bos>").value(), fmt::join(ids, ",")));

  const auto ids_file = dir.Write("ids.json", enc.output);
  Run dec = TemperLm(fmt::format("decode --tokenizer {} < {}", ChatTokenizerPath(), ids_file.string()), false);
  REQUIRE(dec.exit_code == 0);
  CHECK(dec.output == text);
  Run skip = TemperLm(
      fmt::format("decode --tokenizer {} --skip-special-tokens < {}", ChatTokenizerPath(), ids_file.string()), false);
  CHECK(skip.output == "user model\n\nthe \xE2\x82\xAC");

  Run bad = TemperLm(
      fmt::format("decode --tokenizer {} < {}", ChatTokenizerPath(), dir.Write("bad.json", "[2, \"x\"]").string()));
  CHECK(bad.exit_code == 1);
  CHECK(bad.output.find("stdin: element 1 (\"x\") is not a token id") != std::string::npos);
  Run unknown = TemperLm(
      fmt::format("decode --tokenizer {} < {}", ChatTokenizerPath(), dir.Write("big.json", "[5000]").string()));
  CHECK(unknown.exit_code == 1);
  CHECK(unknown.output.find("5000 is not a token id") != std::string::npos);
  Run missing = TemperLm(fmt::format("encode --tokenizer /nonexistent/tokenizer.json < {}", text_file.string()));
  CHECK(missing.exit_code == 1);
  CHECK(missing.output.find("/nonexistent/tokenizer.json") != std::string::npos);
}

TEST_CASE("temper-lm generate --prompt tokenizes the prompt and prints the new text", "[engine][temper-lm]") {
  TempDir dir;
  const std::filesystem::path tokenizer = TinyCompatibleTokenizer(dir);
  const Tokenizer tok = LoadTokenizer(tokenizer.string());
  const std::string model = TinyDir().string();

  // --prompt is --ids of the encoded prompt with <bos> first, plus a line of text.
  const std::vector<int32_t> prompt_ids = tok.Encode("hello user", EncodeOptions{.add_special_tokens = true});
  Run by_ids = TemperLm(
      fmt::format("generate --model {} --ids {} --max-new 8 --greedy", model, fmt::join(prompt_ids, ",")), false);
  REQUIRE(by_ids.exit_code == 0);
  Run by_prompt = TemperLm(fmt::format("generate --model {} --tokenizer {} --prompt 'hello user' --max-new 8 --greedy",
                                       model, tokenizer.string()),
                           false);
  REQUIRE(by_prompt.exit_code == 0);
  REQUIRE(by_prompt.output.starts_with(by_ids.output));
  std::vector<int32_t> produced;
  for (const auto& id : nlohmann::json::parse("[" + by_ids.output + "]")) produced.push_back(id.get<int32_t>());
  CHECK(by_prompt.output.substr(by_ids.output.size()) == tok.Decode(produced).value() + "\n");

  // --chat renders the prompt as a user turn of the chat format.
  ChatFormat format = ChatFormat::Create(tok).value();
  Conversation c;
  c.messages.push_back(ChatMessage{.role = ChatRole::kUser, .content = "hello user"});
  const std::vector<int32_t> chat_ids = format.Render(c).value().ids;
  std::vector<int32_t> stops = {1};  // the tiny config's eos_token_id, then the format's
  for (int32_t id : format.stop_ids()) stops.push_back(id);
  Run chat_by_ids = TemperLm(fmt::format("generate --model {} --ids {} --stop {} --max-new 8 --greedy", model,
                                         fmt::join(chat_ids, ","), fmt::join(stops, ",")),
                             false);
  Run chat =
      TemperLm(fmt::format("generate --model {} --tokenizer {} --prompt 'hello user' --chat --max-new 8 --greedy",
                           model, tokenizer.string()),
               false);
  REQUIRE(chat.exit_code == 0);
  CHECK(chat.output.starts_with(chat_by_ids.output));

  Run no_tokenizer = TemperLm(fmt::format("generate --model {} --prompt hi --max-new 2", model));
  CHECK(no_tokenizer.exit_code == 1);
  CHECK(no_tokenizer.output.find("gemma4-tiny/tokenizer.json") != std::string::npos);
  Run synthetic = TemperLm(fmt::format("generate --synthetic {}/config.json --prompt hi --max-new 2", model));
  CHECK(synthetic.exit_code == 1);
  CHECK(synthetic.output.find("--prompt with --synthetic needs --tokenizer FILE") != std::string::npos);
  CHECK(TemperLm(fmt::format("generate --model {} --ids 2 --prompt hi --max-new 2", model)).exit_code != 0);
}

}  // namespace
}  // namespace temper::engine::testing
