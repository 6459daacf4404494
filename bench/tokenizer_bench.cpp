// tokenizer_bench: how fast the tokenizer loads Gemma's tokenizer.json and encodes text.
//
// Goals (issue 5): load the 33 MB file in under 1 s; encode at >= 5 MB/s on one core. Timed here,
// never in tests. The corpus is every "text" of a cases.jsonl (prose, code, configs, CJK, emoji,
// whitespace runs), joined by newlines and repeated to about 8 MB, then encoded in chunks of about
// 4 KB (the size of a prompt section) on one thread.
//
//   tokenizer_bench TOKENIZER.json CASES.jsonl
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/bench_timing.h"
#include "engine/tokenizer/tokenizer.h"

using temper::bench::Clock;
using temper::bench::Seconds;

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s TOKENIZER.json CASES.jsonl\n", argv[0]);
    return 2;
  }
  using temper::engine::Tokenizer;

  double best_load = 1e9;
  std::optional<Tokenizer> tok;
  for (int i = 0; i < 3; ++i) {
    auto t0 = Clock::now();
    auto loaded = Tokenizer::FromFile(argv[1]);
    const double s = Seconds(t0, Clock::now());
    if (!loaded.ok()) {
      std::fprintf(stderr, "%s\n", loaded.status().ToString().c_str());
      return 1;
    }
    best_load = std::min(best_load, s);
    tok.emplace(std::move(loaded).value());
  }
  std::printf("load %s: best of 3 %.3f s (%d ids)\n", argv[1], best_load, tok->id_limit());

  std::ifstream in(argv[2]);
  std::string line;
  std::string corpus;
  while (std::getline(in, line)) {
    auto c = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (c.is_object() && c.contains("text") && c["text"].is_string()) corpus += c["text"].get<std::string>() + "\n";
  }
  if (corpus.empty()) {
    std::fprintf(stderr, "no \"text\" lines in %s\n", argv[2]);
    return 1;
  }
  const size_t one_pass = corpus.size();
  while (corpus.size() < (8u << 20)) corpus += corpus.substr(0, one_pass);

  // Chunks of ~4 KB cut at newlines.
  std::vector<std::string_view> chunks;
  for (size_t pos = 0; pos < corpus.size();) {
    size_t end = std::min(corpus.size(), pos + 4096);
    size_t nl = corpus.find('\n', end);
    end = nl == std::string::npos ? corpus.size() : nl + 1;
    chunks.push_back(std::string_view(corpus).substr(pos, end - pos));
    pos = end;
  }

  double best_encode = 1e9;
  size_t tokens = 0;
  for (int round = 0; round < 3; ++round) {
    tokens = 0;
    auto t0 = Clock::now();
    for (std::string_view chunk : chunks) tokens += tok->Encode(chunk).size();
    best_encode = std::min(best_encode, Seconds(t0, Clock::now()));
  }
  const double mb = static_cast<double>(corpus.size()) / 1e6;
  std::printf("encode: %.1f MB in %zu chunks, %zu tokens: best of 3 %.3f s = %.1f MB/s, %.2f M tokens/s\n", mb,
              chunks.size(), tokens, best_encode, mb / best_encode, static_cast<double>(tokens) / best_encode / 1e6);

  std::vector<int32_t> ids = tok->Encode(corpus);
  auto t0 = Clock::now();
  auto text = tok->Decode(ids);
  const double decode_s = Seconds(t0, Clock::now());
  // Exact except for literal U+2581 "▁", which decodes as a space (two of the cases hold one).
  std::string expected;
  for (size_t pos = 0; pos < corpus.size();) {
    if (corpus.compare(pos, 3, "\xE2\x96\x81") == 0) {
      expected += ' ';
      pos += 3;
    } else {
      expected += corpus[pos++];
    }
  }
  if (!text.ok() || *text != expected) {
    std::fprintf(stderr, "decode(encode(corpus)) != corpus\n");
    return 1;
  }
  std::printf("decode: %zu tokens in %.3f s = %.1f MB/s (round trip exact)\n", ids.size(), decode_s, mb / decode_s);
  return 0;
}
