// PromptLibrary: the roles' instruction texts (roles/prompts/*.md) and their {{placeholders}}.
//
// The prompts are embedded into the binary at build time (roles/embed_prompts.cmake), so an
// installed temperd needs no data directory and tests always see the source tree's prompts. An
// operator who wants to tune them points temperd at a directory with LoadDir(): every prompt the
// roles need must be there (a missing file is an error, not a silent fallback to the embedded one).
//
// Render() substitutes {{name}} placeholders; a placeholder without a value is an error naming it and
// the prompt, so a typo in an edited prompt is caught at the first use rather than sent to a model.
// Thread safety: immutable after construction.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"

namespace temper {

// Defined in the generated prompts_embedded.cpp.
std::vector<std::pair<std::string_view, std::string_view>> EmbeddedPrompts();

class PromptLibrary {
 public:
  // The prompts every role needs: architect, architect_reengage, worker, reflector.
  static const std::vector<std::string>& RequiredNames();

  static PromptLibrary Embedded();
  // Reads <dir>/<name>.md for every required name. NotFound naming the file when one is missing.
  static Result<PromptLibrary> LoadDir(const std::string& dir);

  Result<std::string> Render(std::string_view name, const std::map<std::string, std::string>& values = {}) const;

 private:
  std::map<std::string, std::string, std::less<>> texts_;
  std::string source_;  // "embedded" or the directory, for errors
};

}  // namespace temper
