#include "engine/constrain/schema_refs.h"

#include <algorithm>
#include <charconv>
#include <vector>

#include <fmt/format.h>

namespace temper::engine {
namespace {

using ojson = nlohmann::ordered_json;

// One reference token of a JSON pointer, unescaped: %XX (the pointer sits in a URI fragment), then
// ~1 to '/' and ~0 to '~' (RFC 6901 §4).
std::string Unescape(std::string_view token) {
  std::string percent;
  for (size_t i = 0; i < token.size(); ++i) {
    unsigned value = 0;
    if (token[i] == '%' && i + 2 < token.size() &&
        std::from_chars(token.data() + i + 1, token.data() + i + 3, value, 16).ptr == token.data() + i + 3) {
      percent.push_back(static_cast<char>(value));
      i += 2;
    } else {
      percent.push_back(token[i]);
    }
  }
  std::string out;
  for (size_t i = 0; i < percent.size(); ++i) {
    if (percent[i] == '~' && i + 1 < percent.size() && (percent[i + 1] == '0' || percent[i + 1] == '1')) {
      out.push_back(percent[i + 1] == '0' ? '~' : '/');
      ++i;
    } else {
      out.push_back(percent[i]);
    }
  }
  return out;
}

bool IsNullSchema(const ojson& s) {
  return s.is_object() && s.contains("type") && s["type"] == "null" && s.size() <= 3;  // with title/description
}

class Renderer {
 public:
  Renderer(const ojson& root, std::string path) : root_(root), path_(std::move(path)) {}

  Result<ojson> Render(const ojson& s, const std::string& path) {
    if (!s.is_object()) return s;
    if (auto ref = s.find("$ref"); ref != s.end()) {
      TEMPER_ASSIGN_OR_RETURN(const ojson* target, ResolveLocalRef(root_, *ref, path));
      const std::string key = ref->get<std::string>();
      ojson out;
      if (std::find(chain_.begin(), chain_.end(), key) != chain_.end()) {
        out = ojson::object();
        for (const char* k : {"type", "description"}) {
          if (target->is_object() && target->contains(k)) out[k] = (*target)[k];
        }
      } else {
        chain_.push_back(key);
        TEMPER_ASSIGN_OR_RETURN(out, Render(*target, path_ + key.substr(1)));
        chain_.pop_back();
      }
      return Overlay(std::move(out), s, path, {"$ref"});
    }
    for (const char* union_key : {"anyOf", "oneOf"}) {
      auto u = s.find(union_key);
      if (u == s.end() || !u->is_array() || u->size() != 2) continue;
      for (size_t i = 0; i < 2; ++i) {
        if (!IsNullSchema((*u)[1 - i])) continue;
        TEMPER_ASSIGN_OR_RETURN(ojson out, Render((*u)[i], fmt::format("{}/{}/{}", path, union_key, i)));
        if (out.is_object()) out["nullable"] = true;
        return Overlay(std::move(out), s, path, {union_key});
      }
    }
    if (auto all = s.find("allOf"); all != s.end() && all->is_array() && all->size() == 1) {
      TEMPER_ASSIGN_OR_RETURN(ojson out, Render((*all)[0], path + "/allOf/0"));
      return Overlay(std::move(out), s, path, {"allOf"});
    }
    return Overlay(ojson::object(), s, path, {});
  }

 private:
  // `base` with every key of `s` but `skip` (and the $defs) laid over it, subschemas rendered.
  Result<ojson> Overlay(ojson base, const ojson& s, const std::string& path, std::vector<std::string> skip) {
    if (!base.is_object()) return base;
    skip.insert(skip.end(), {"$defs", "definitions"});
    for (const auto& [k, v] : s.items()) {
      if (std::find(skip.begin(), skip.end(), k) != skip.end()) continue;
      const std::string here = path + "/" + k;
      if (k == "properties" && v.is_object()) {
        ojson props = ojson::object();
        for (const auto& [name, sub] : v.items()) {
          TEMPER_ASSIGN_OR_RETURN(props[name], Render(sub, here + "/" + name));
        }
        base[k] = std::move(props);
      } else if ((k == "items" || k == "additionalProperties") && v.is_object()) {
        TEMPER_ASSIGN_OR_RETURN(base[k], Render(v, here));
      } else if ((k == "anyOf" || k == "oneOf" || k == "allOf" || k == "prefixItems") && v.is_array()) {
        ojson list = ojson::array();
        for (size_t i = 0; i < v.size(); ++i) {
          TEMPER_ASSIGN_OR_RETURN(ojson item, Render(v[i], fmt::format("{}/{}", here, i)));
          list.push_back(std::move(item));
        }
        base[k] = std::move(list);
      } else if (k == "type" && v.is_array() && v.size() == 2 && (v[0] == "null" || v[1] == "null")) {
        base[k] = v[0] == "null" ? v[1] : v[0];
        base["nullable"] = true;
      } else {
        base[k] = v;
      }
    }
    return base;
  }

  const ojson& root_;
  const std::string path_;
  std::vector<std::string> chain_;  // the refs being written out, outermost first
};

}  // namespace

Result<const ojson*> ResolveLocalRef(const ojson& root, const ojson& ref, const std::string& path) {
  if (!ref.is_string()) return Status::InvalidArgument(fmt::format("{}/$ref: must be a string", path));
  const std::string text = ref.get<std::string>();
  if (text.empty() || text[0] != '#') {
    return Status::InvalidArgument(fmt::format(
        "{}/$ref: '{}' is not a local reference ('#' or '#/...'); remote schemas are not fetched", path, text));
  }
  if (text.size() > 1 && text[1] != '/') {
    return Status::InvalidArgument(
        fmt::format("{}/$ref: '{}' is an anchor; only JSON pointers ('#/...') are supported", path, text));
  }
  const ojson* at = &root;
  for (size_t from = 1; from < text.size();) {
    const size_t end = std::min(text.find('/', from + 1), text.size());
    const std::string token = Unescape(std::string_view(text).substr(from + 1, end - from - 1));
    from = end;
    const ojson* next = nullptr;
    if (at->is_object()) {
      if (auto it = at->find(token); it != at->end()) next = &*it;
    } else if (at->is_array()) {
      size_t index = 0;
      const auto [ptr, ec] = std::from_chars(token.data(), token.data() + token.size(), index);
      if (ec == std::errc() && ptr == token.data() + token.size() && index < at->size()) next = &(*at)[index];
    }
    if (next == nullptr) {
      return Status::InvalidArgument(fmt::format("{}/$ref: '{}' points to nothing in the schema", path, text));
    }
    at = next;
  }
  return at;
}

Result<nlohmann::json> RenderableToolSchema(const nlohmann::json& parameters, const std::string& path) {
  const ojson root(parameters);
  Renderer renderer(root, path);
  TEMPER_ASSIGN_OR_RETURN(ojson out, renderer.Render(root, path));
  return nlohmann::json(out);
}

}  // namespace temper::engine
