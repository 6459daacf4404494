#include "scripted_model/model_script.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <fstream>
#include <set>
#include <sstream>
#include <vector>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "common/closest_match.h"

namespace temper::scripted {

namespace {

// Reads one YAML document; every error is located "file:line:col: path: message".
class Reader {
 public:
  explicit Reader(std::string source) : source_(std::move(source)) {}

  Status Error(const YAML::Node& node, std::string_view path, std::string_view message) const {
    const YAML::Mark m = node.Mark();
    if (m.is_null()) return Status::InvalidArgument(fmt::format("{}: {}: {}", source_, path, message));
    return Status::InvalidArgument(fmt::format("{}:{}:{}: {}: {}", source_, m.line + 1, m.column + 1, path, message));
  }

  // The entries of a mapping in file order; unknown and repeated keys are errors.
  Result<std::vector<std::pair<std::string, YAML::Node>>> Map(const YAML::Node& node, std::string_view path,
                                                              const std::vector<std::string>& allowed) const {
    if (!node.IsMap()) return Error(node, path, "expected a mapping");
    std::vector<std::pair<std::string, YAML::Node>> out;
    std::set<std::string> seen;
    for (const auto& kv : node) {
      if (!kv.first.IsScalar()) return Error(kv.first, path, "keys must be plain names");
      std::string key = kv.first.Scalar();
      std::string where = path.empty() ? key : fmt::format("{}.{}", path, key);
      if (!allowed.empty() && std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
        return Error(kv.first, where,
                     fmt::format("unknown key '{}'{}; the keys are {}", key, DidYouMean(key, allowed),
                                 fmt::join(allowed, ", ")));
      }
      if (!seen.insert(key).second) return Error(kv.first, where, "the key is repeated");
      out.emplace_back(std::move(key), kv.second);
    }
    return out;
  }

  Result<std::string> String(const YAML::Node& node, std::string_view path) const {
    if (!node.IsScalar() || node.Scalar().empty()) return Error(node, path, "expected a non-empty string");
    return node.Scalar();
  }

  Result<int> Int(const YAML::Node& node, std::string_view path, int min, int max) const {
    if (!node.IsScalar()) return Error(node, path, "expected an integer");
    const std::string& s = node.Scalar();
    int v = 0;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || end != s.data() + s.size()) {
      return Error(node, path, fmt::format("expected an integer, got '{}'", s));
    }
    if (v < min || v > max) return Error(node, path, fmt::format("{} is outside [{}, {}]", v, min, max));
    return v;
  }

  Result<bool> Bool(const YAML::Node& node, std::string_view path) const {
    if (node.IsScalar() && node.Scalar() == "true") return true;
    if (node.IsScalar() && node.Scalar() == "false") return false;
    return Error(node, path, "expected true or false");
  }

  // One of `names`, case-insensitive; returns its index.
  Result<size_t> OneOf(const YAML::Node& node, std::string_view path, const std::vector<std::string>& names) const {
    TEMPER_ASSIGN_OR_RETURN(std::string s, String(node, path));
    std::string lower;
    for (char c : s) lower.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
    for (size_t i = 0; i < names.size(); ++i) {
      if (lower == names[i]) return i;
    }
    return Error(node, path,
                 fmt::format("'{}' is not one of {}{}", s, fmt::join(names, ", "), DidYouMean(lower, names)));
  }

 private:
  std::string source_;
};

const std::vector<std::string> kReengageNames = {"continue", "pivot", "escalate"};

Result<RuleScript> ParseRule(const Reader& r, const YAML::Node& node, const std::string& path) {
  RuleScript rule;
  if (node.IsScalar()) {
    TEMPER_ASSIGN_OR_RETURN(size_t which, r.OneOf(node, path, {"fix", "wrong_first", "regress", "unfixable", "skip"}));
    if (which == 1) rule.wrong_first = 1;
    if (which == 2) rule.regress_first = 1;
    if (which == 3) rule.unfixable = true;
    if (which == 4) rule.skip = true;
    return rule;
  }
  TEMPER_ASSIGN_OR_RETURN(auto entries,
                          r.Map(node, path, {"wrong_first", "regress_first", "unfixable", "skip", "reengage"}));
  for (const auto& [key, value] : entries) {
    const std::string where = path + "." + key;
    if (key == "wrong_first") {
      TEMPER_ASSIGN_OR_RETURN(rule.wrong_first, r.Int(value, where, 0, 1000));
    } else if (key == "regress_first") {
      TEMPER_ASSIGN_OR_RETURN(rule.regress_first, r.Int(value, where, 0, 1000));
    } else if (key == "unfixable") {
      TEMPER_ASSIGN_OR_RETURN(rule.unfixable, r.Bool(value, where));
    } else if (key == "skip") {
      TEMPER_ASSIGN_OR_RETURN(rule.skip, r.Bool(value, where));
    } else {
      TEMPER_ASSIGN_OR_RETURN(size_t which, r.OneOf(value, where, kReengageNames));
      rule.reengage = static_cast<Reengage>(which);
    }
  }
  return rule;
}

Result<FaultScript> ParseFaults(const Reader& r, const YAML::Node& node) {
  FaultScript f;
  TEMPER_ASSIGN_OR_RETURN(
      auto entries, r.Map(node, "faults",
                          {"fail_first", "fail_status", "retry_after_seconds", "cut_streams_first", "cut_after_text"}));
  for (const auto& [key, value] : entries) {
    const std::string where = "faults." + key;
    if (key == "fail_first") {
      TEMPER_ASSIGN_OR_RETURN(f.fail_first, r.Int(value, where, 0, 1000000));
    } else if (key == "fail_status") {
      TEMPER_ASSIGN_OR_RETURN(f.fail_status, r.Int(value, where, 400, 599));
      if (f.fail_status != 429 && f.fail_status != 500 && f.fail_status != 502 && f.fail_status != 503) {
        return r.Error(value, where,
                       fmt::format("{} is not one of 429, 500, 502, 503 (the statuses clients retry)", f.fail_status));
      }
    } else if (key == "retry_after_seconds") {
      TEMPER_ASSIGN_OR_RETURN(f.retry_after_seconds, r.Int(value, where, 0, 3600));
    } else if (key == "cut_streams_first") {
      TEMPER_ASSIGN_OR_RETURN(f.cut_streams_first, r.Int(value, where, 0, 1000000));
    } else {
      TEMPER_ASSIGN_OR_RETURN(f.cut_after_text, r.Bool(value, where));
    }
  }
  return f;
}

}  // namespace

std::string ShortRuleName(std::string_view rule_id) {
  if (rule_id.substr(0, kRulePrefix.size()) == kRulePrefix) rule_id.remove_prefix(kRulePrefix.size());
  return std::string(rule_id);
}

std::string_view ReengageName(Reengage r) {
  switch (r) {
    case Reengage::kContinue:
      return "CONTINUE";
    case Reengage::kPivot:
      return "PIVOT";
    case Reengage::kEscalate:
      return "ESCALATE";
  }
  return "CONTINUE";
}

RuleScript ModelScript::For(std::string_view rule_id) const {
  auto it = rules.find(ShortRuleName(rule_id));
  return it == rules.end() ? RuleScript{} : it->second;
}

AttemptKind ModelScript::KindOf(std::string_view rule_id, int attempt) const {
  const RuleScript r = For(rule_id);
  if (r.unfixable || attempt <= r.wrong_first) return AttemptKind::kWrong;
  if (attempt <= r.wrong_first + r.regress_first) return AttemptKind::kFixAndRegress;
  return AttemptKind::kFix;
}

std::string ModelScript::RegressCommand(std::string_view rule_id) const {
  return regress_command.empty() ? DefaultRegressCommand(rule_id) : regress_command;
}

std::string DefaultRegressCommand(std::string_view rule_id) {
  return fmt::format("printf 'exit 1\\n' > /etc/profile.d/zz-temper-regress-{}.sh", ShortRuleName(rule_id));
}

Result<ModelScript> ParseModelScript(const std::string& yaml_text, const std::string& source_name) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(fmt::format("{}:{}:{}: {}", source_name, e.mark.line + 1, e.mark.column + 1, e.msg));
  }
  ModelScript script;
  if (root.IsNull()) return script;  // an empty file: every rule is fixed at once
  const Reader r(source_name);
  TEMPER_ASSIGN_OR_RETURN(auto entries,
                          r.Map(root, "", {"tool_calls", "reengage", "regress_command", "faults", "rules"}));
  for (const auto& [key, value] : entries) {
    if (key == "tool_calls") {
      TEMPER_ASSIGN_OR_RETURN(size_t which, r.OneOf(value, key, {"native", "text"}));
      script.tool_calls = which == 0 ? ToolCallStyle::kNative : ToolCallStyle::kText;
    } else if (key == "reengage") {
      TEMPER_ASSIGN_OR_RETURN(size_t which, r.OneOf(value, key, kReengageNames));
      script.reengage = static_cast<Reengage>(which);
    } else if (key == "regress_command") {
      TEMPER_ASSIGN_OR_RETURN(script.regress_command, r.String(value, key));
    } else if (key == "faults") {
      TEMPER_ASSIGN_OR_RETURN(script.faults, ParseFaults(r, value));
    } else {
      if (value.IsNull()) continue;
      TEMPER_ASSIGN_OR_RETURN(auto rules, r.Map(value, "rules", {}));
      for (const auto& [id, rule_node] : rules) {
        const std::string path = "rules." + id;
        TEMPER_ASSIGN_OR_RETURN(RuleScript rule, ParseRule(r, rule_node, path));
        const std::string short_name = ShortRuleName(id);
        if (short_name.empty()) return r.Error(rule_node, path, "the rule id is only the prefix");
        if (!script.rules.emplace(short_name, rule).second) {
          return r.Error(rule_node, path,
                         fmt::format("the rule '{}' is listed twice (by full and short id)", short_name));
        }
      }
    }
  }
  return script;
}

Result<ModelScript> LoadModelScript(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (errno == ENOENT) return Status::NotFound(fmt::format("the model script {} does not exist", path));
    return Status::FromErrno(errno, fmt::format("opening the model script {}", path));
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return Status::FromErrno(errno, fmt::format("reading the model script {}", path));
  return ParseModelScript(text.str(), path);
}

}  // namespace temper::scripted
