// Test helper: a Gemma 4 chat tokenizer with the real 262,144-entry vocabulary.
//
// Gemma 4's own tokenizer.json cannot be downloaded here. Its vocabulary is Gemma 3's (262,144
// ids, the same BPE) with the turn, thinking and tool tokens of Gemma 4's chat format as special
// tokens; so this is the Gemma 3 fixture (tests/data/tokenizer/gemma3-tokenizer.json.gz) with its
// first twelve unused slots (<unused0>..<unused11>, ids 6-17) renamed to those twelve control
// tokens and marked special. Ids differ from Gemma 4's, which ChatFormat never assumes (it reads
// them from the file). Prompts tokenize to Gemma's real lengths, so the roles' real prompts can be
// served by a synthetic model, and token masks are exercised at the real vocabulary's size.
#pragma once

#include <string>

#include "common/status.h"

namespace temper::engine::testing {

// The tokenizer.json text (about 33 MB).
Result<std::string> Gemma4VocabularyTokenizerJson();

}  // namespace temper::engine::testing
