#include "policy/shell_variables.h"

#include <cctype>

namespace temper {

namespace {

bool IsNameChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

std::vector<std::string> SplitBlanks(const std::string& s) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
    size_t j = i;
    while (j < s.size() && !std::isspace(static_cast<unsigned char>(s[j]))) ++j;
    if (j > i) out.push_back(s.substr(i, j - i));
    i = j;
  }
  return out;
}

struct Reference {
  std::string name;
  bool all = false;  // ${x[@]} or ${x[*]}
};

// `word` as one whole variable reference.
std::optional<Reference> WholeReference(std::string_view word) {
  if (word.size() < 2 || word[0] != '$') return std::nullopt;
  std::string_view body = word.substr(1);
  if (body.front() == '{') {
    if (body.back() != '}') return std::nullopt;
    body = body.substr(1, body.size() - 2);
  }
  Reference r;
  size_t k = 0;
  while (k < body.size() && IsNameChar(body[k])) ++k;
  r.name = std::string(body.substr(0, k));
  if (r.name.empty() || std::isdigit(static_cast<unsigned char>(r.name[0]))) return std::nullopt;
  std::string_view rest = body.substr(k);
  if (rest == "[@]" || rest == "[*]") r.all = true;
  else if (!rest.empty() && rest != "[0]") return std::nullopt;
  if (word[1] != '{' && !rest.empty()) return std::nullopt;
  return r;
}

}  // namespace

ShellVariables::ShellVariables(const std::vector<ShellAssignment>& assignments) {
  for (const ShellAssignment& a : assignments) {
    Values& v = vars_[a.name];
    if (a.computed) {
      v.computed = true;
      continue;
    }
    if (a.alternatives) {
      for (const std::string& value : a.values) v.candidates.push_back({value});
    } else if (a.append && !v.candidates.empty()) {
      for (std::vector<std::string>& c : v.candidates) c.insert(c.end(), a.values.begin(), a.values.end());
    } else {
      v.candidates.push_back(a.values);
    }
  }
}

std::optional<std::vector<std::vector<std::string>>> ShellVariables::Resolve(std::string_view word) const {
  std::optional<Reference> ref = WholeReference(word);
  if (!ref) return std::nullopt;
  auto it = vars_.find(ref->name);
  if (it == vars_.end() || it->second.computed || it->second.candidates.empty()) return std::nullopt;
  std::vector<std::vector<std::string>> out;
  for (const std::vector<std::string>& c : it->second.candidates) {
    std::vector<std::string> words;
    const size_t n = ref->all ? c.size() : std::min<size_t>(1, c.size());
    for (size_t k = 0; k < n; ++k) {
      for (std::string& w : SplitBlanks(c[k])) words.push_back(std::move(w));
    }
    out.push_back(std::move(words));
  }
  return out;
}

std::string ShellVariables::Substitute(std::string_view text) const {
  std::string out;
  size_t i = 0;
  while (i < text.size()) {
    if (text[i] != '$' || i + 1 >= text.size()) {
      out.push_back(text[i++]);
      continue;
    }
    size_t end = i + 1;
    bool braced = text[end] == '{';
    if (braced) ++end;
    const size_t name_start = end;
    while (end < text.size() && IsNameChar(text[end])) ++end;
    const std::string name(text.substr(name_start, end - name_start));
    const bool closed = !braced || (end < text.size() && text[end] == '}');
    auto it = vars_.find(name);
    if (name.empty() || !closed || it == vars_.end() || it->second.computed || it->second.candidates.size() != 1 ||
        it->second.candidates[0].size() != 1) {
      out.push_back(text[i++]);
      continue;
    }
    out += it->second.candidates[0][0];
    i = braced ? end + 1 : end;
  }
  return out;
}

}  // namespace temper
