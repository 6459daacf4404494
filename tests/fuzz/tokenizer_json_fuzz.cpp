// libFuzzer target: Tokenizer::FromJson on arbitrary bytes, then Encode/Decode with what loaded.
//
// tokenizer.json comes with whatever checkpoint a user points temper at, so the loader must turn
// every malformed file into a Status: no crash, no hang, no unbounded allocation. Seeds:
// tests/data/tokenizer/*.json. Run: build-fuzz/tests/fuzz/fuzz_tokenizer_json CORPUS_DIR
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "engine/tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto tok = temper::engine::Tokenizer::FromJson(text);
  if (!tok.ok()) return 0;
  // Whatever loaded must encode any text, and decode what it encoded.
  const std::vector<int32_t> ids = tok->Encode(text.substr(0, 256));
  auto decoded = tok->Decode(ids);
  if (!decoded.ok()) __builtin_trap();
  return 0;
}
