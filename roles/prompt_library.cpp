#include "roles/prompt_library.h"

#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "common/closest_match.h"

namespace temper {

const std::vector<std::string>& PromptLibrary::RequiredNames() {
  static const std::vector<std::string> names = {"architect", "architect_reengage", "worker", "reflector"};
  return names;
}

PromptLibrary PromptLibrary::Embedded() {
  PromptLibrary lib;
  lib.source_ = "the embedded prompts";
  for (const auto& [name, text] : EmbeddedPrompts()) lib.texts_.emplace(std::string(name), std::string(text));
  return lib;
}

Result<PromptLibrary> PromptLibrary::LoadDir(const std::string& dir) {
  PromptLibrary lib;
  lib.source_ = dir;
  for (const std::string& name : RequiredNames()) {
    const std::string path = fmt::format("{}/{}.md", dir, name);
    std::ifstream in(path);
    if (!in) return Status::NotFound(fmt::format("prompt file {} is missing or unreadable", path));
    std::stringstream ss;
    ss << in.rdbuf();
    lib.texts_.emplace(name, ss.str());
  }
  return lib;
}

Result<std::string> PromptLibrary::Render(std::string_view name,
                                          const std::map<std::string, std::string>& values) const {
  auto it = texts_.find(name);
  if (it == texts_.end()) {
    std::vector<std::string> known;
    for (const auto& [k, v] : texts_) known.push_back(k);
    return Status::NotFound(fmt::format("no prompt '{}' in {}{}", name, source_, DidYouMean(name, known)));
  }
  const std::string& t = it->second;
  std::string out;
  size_t pos = 0;
  for (;;) {
    size_t open = t.find("{{", pos);
    if (open == std::string::npos) break;
    size_t close = t.find("}}", open + 2);
    if (close == std::string::npos) break;
    std::string key = t.substr(open + 2, close - open - 2);
    auto v = values.find(key);
    if (v == values.end()) {
      return Status::InvalidArgument(
          fmt::format("prompt '{}' in {} uses {{{{{}}}}}, which has no value", name, source_, key));
    }
    out.append(t, pos, open - pos);
    out += v->second;
    pos = close + 2;
  }
  out.append(t, pos, std::string::npos);
  return out;
}

}  // namespace temper
