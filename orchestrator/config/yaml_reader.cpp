#include "orchestrator/config/yaml_reader.h"

#include <cerrno>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "common/closest_match.h"

namespace temper {

namespace {

std::string JoinPath(const std::string& parent, std::string_view key) {
  return parent.empty() ? std::string(key) : fmt::format("{}.{}", parent, key);
}

}  // namespace

Result<YamlNode> YamlNode::LoadString(const std::string& text, const std::string& source_name) {
  try {
    YAML::Node root = YAML::Load(text);
    return YamlNode(root, source_name, "");
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(
        fmt::format("{}:{}:{}: YAML syntax error: {}", source_name, e.mark.line + 1, e.mark.column + 1, e.msg));
  }
}

Result<YamlNode> YamlNode::LoadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    int err = errno;
    if (err == ENOENT) return Status::NotFound(fmt::format("{}: no such file", path));
    return Status::FromErrno(err, fmt::format("cannot read {}", path));
  }
  std::ostringstream text;
  text << in.rdbuf();
  return LoadString(text.str(), path);
}

std::string YamlNode::Location() const {
  YAML::Mark mark = node_.IsDefined() ? node_.Mark() : YAML::Mark::null_mark();
  return mark.is_null() ? file_ : fmt::format("{}:{}:{}", file_, mark.line + 1, mark.column + 1);
}

Status YamlNode::Error(std::string_view message) const {
  const std::string where = Location();
  if (path_.empty()) return Status::InvalidArgument(fmt::format("{}: {}", where, message));
  return Status::InvalidArgument(fmt::format("{}: {}: {}", where, path_, message));
}

std::string_view YamlNode::KindName() const {
  if (!node_.IsDefined() || node_.IsNull()) return "nothing";
  if (node_.IsMap()) return "a mapping";
  if (node_.IsSequence()) return "a sequence";
  return "a scalar";
}

YamlNode YamlNode::Child(const YAML::Node& node, std::string_view key) const {
  return YamlNode(node, file_, JoinPath(path_, key));
}

Status YamlNode::ExpectMap() const {
  if (!node_.IsMap()) return Error(fmt::format("expected a mapping, got {}", KindName()));
  std::set<std::string> seen;
  for (const auto& entry : node_) {
    std::string key = entry.first.Scalar();
    if (!seen.insert(key).second) {
      return YamlNode(entry.first, file_, JoinPath(path_, key)).Error("duplicate key");
    }
  }
  return Status::OK();
}

Status YamlNode::ExpectMapWithKeys(std::initializer_list<std::string_view> allowed) const {
  TEMPER_RETURN_IF_ERROR(ExpectMap());
  std::vector<std::string> known(allowed.begin(), allowed.end());
  for (const auto& entry : node_) {
    std::string key = entry.first.Scalar();
    bool ok = false;
    for (std::string_view a : allowed) ok = ok || a == key;
    if (!ok) {
      std::string valid;
      for (std::string_view a : allowed) valid += fmt::format("{}{}", valid.empty() ? "" : ", ", a);
      return YamlNode(entry.first, file_, JoinPath(path_, key))
          .Error(fmt::format("unknown key{} (valid keys here: {})", DidYouMean(key, known), valid));
    }
  }
  return Status::OK();
}

std::optional<YamlNode> YamlNode::Find(std::string_view key) const {
  if (!node_.IsMap()) return std::nullopt;
  for (const auto& entry : node_) {
    if (entry.first.Scalar() == key) {
      if (entry.second.IsNull()) return std::nullopt;
      return Child(entry.second, key);
    }
  }
  return std::nullopt;
}

Result<YamlNode> YamlNode::Require(std::string_view key) const {
  std::optional<YamlNode> child = Find(key);
  if (!child) return Error(fmt::format("missing required key '{}'", key));
  return *child;
}

std::vector<std::pair<std::string, YamlNode>> YamlNode::Entries() const {
  std::vector<std::pair<std::string, YamlNode>> out;
  if (!node_.IsMap()) return out;
  for (const auto& entry : node_) {
    std::string key = entry.first.Scalar();
    out.emplace_back(key, Child(entry.second, key));
  }
  return out;
}

Result<std::vector<YamlNode>> YamlNode::Items() const {
  if (!node_.IsSequence()) return Error(fmt::format("expected a sequence, got {}", KindName()));
  std::vector<YamlNode> out;
  size_t i = 0;
  for (const auto& item : node_) {
    out.push_back(YamlNode(item, file_, fmt::format("{}[{}]", path_, i++)));
  }
  return out;
}

Result<std::string> YamlNode::AsString() const {
  if (!node_.IsScalar()) return Error(fmt::format("expected a string, got {}", KindName()));
  if (node_.Scalar().empty()) return Error("must not be empty");
  return node_.Scalar();
}

Result<std::string> YamlNode::AsPath() const {
  TEMPER_ASSIGN_OR_RETURN(std::string value, AsString());
  std::filesystem::path p(value);
  if (p.is_relative()) p = std::filesystem::absolute(std::filesystem::path(file_)).parent_path() / p;
  return p.lexically_normal().string();
}

Result<bool> YamlNode::AsBool() const {
  if (node_.IsScalar()) {
    const std::string& s = node_.Scalar();
    if (s == "true") return true;
    if (s == "false") return false;
  }
  return Error("expected true or false");
}

Result<int64_t> YamlNode::AsInt(int64_t min, int64_t max) const {
  if (!node_.IsScalar()) return Error(fmt::format("expected an integer, got {}", KindName()));
  const std::string& s = node_.Scalar();
  size_t used = 0;
  long long value = 0;
  try {
    value = std::stoll(s, &used, 10);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != s.size()) return Error(fmt::format("expected an integer, got '{}'", s));
  if (value < min || value > max) {
    return Error(fmt::format("{} is out of range [{}, {}]", value, min, max));
  }
  return static_cast<int64_t>(value);
}

Result<double> YamlNode::AsDouble(double min, double max) const {
  if (!node_.IsScalar()) return Error(fmt::format("expected a number, got {}", KindName()));
  const std::string& s = node_.Scalar();
  size_t used = 0;
  double value = 0;
  try {
    value = std::stod(s, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != s.size() || !std::isfinite(value)) {
    return Error(fmt::format("expected a number, got '{}'", s));
  }
  if (value < min || value > max) return Error(fmt::format("{} is out of range [{}, {}]", s, min, max));
  return value;
}

Result<std::chrono::seconds> YamlNode::AsDuration(std::chrono::seconds min, std::chrono::seconds max) const {
  if (!node_.IsScalar()) return Error(fmt::format("expected a duration, got {}", KindName()));
  Result<std::chrono::seconds> d = ParseDuration(node_.Scalar());
  if (!d.ok()) return Error(d.status().message());
  if (*d < min || *d > max) {
    return Error(fmt::format("duration {}s is out of range [{}s, {}s]", d->count(), min.count(), max.count()));
  }
  return *d;
}

Result<std::chrono::seconds> ParseDuration(std::string_view text) {
  auto bad = [&] {
    return Status::InvalidArgument(fmt::format("'{}' is not a duration (examples: 90s, 20m, 1h30m, 2d)", text));
  };
  if (text.empty()) return bad();
  int64_t total = 0;
  size_t i = 0;
  bool any_unit = false;
  while (i < text.size()) {
    size_t start = i;
    int64_t n = 0;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
      if (n > std::numeric_limits<int64_t>::max() / 10 - 10) return bad();
      n = n * 10 + (text[i++] - '0');
    }
    if (i == start) return bad();
    int64_t unit = 1;
    if (i < text.size()) {
      switch (text[i++]) {
        case 'd':
          unit = 86400;
          break;
        case 'h':
          unit = 3600;
          break;
        case 'm':
          unit = 60;
          break;
        case 's':
          unit = 1;
          break;
        default:
          return bad();
      }
      any_unit = true;
    } else if (any_unit) {
      return bad();  // "1h30" is ambiguous
    }
    if (n > (std::numeric_limits<int64_t>::max() - total) / unit) return bad();
    total += n * unit;
  }
  return std::chrono::seconds(total);
}

}  // namespace temper
