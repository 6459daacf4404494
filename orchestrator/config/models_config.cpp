#include "orchestrator/config/models_config.h"

#include <filesystem>

#include <fmt/format.h>

#include "orchestrator/config/yaml_reader.h"

namespace temper {

namespace {

Result<InprocessEndpoint> ParseInprocess(const YamlNode& node) {
  TEMPER_RETURN_IF_ERROR(node.ExpectMapWithKeys(
      {"type", "model_dir", "drafter_dir", "tp", "gpus", "kv_memory_fraction", "max_context", "constrained_decoding"}));
  InprocessEndpoint e;
  TEMPER_ASSIGN_OR_RETURN(YamlNode dir, node.Require("model_dir"));
  TEMPER_ASSIGN_OR_RETURN(e.model_dir, dir.AsPath());
  if (auto n = node.Find("drafter_dir")) {
    TEMPER_ASSIGN_OR_RETURN(e.drafter_dir, n->AsPath());
  }
  std::optional<YamlNode> tp_node = node.Find("tp");
  if (tp_node) {
    TEMPER_ASSIGN_OR_RETURN(int64_t tp, tp_node->AsInt(1, 8));
    if ((tp & (tp - 1)) != 0) return tp_node->Error(fmt::format("tp must be 1, 2, 4 or 8, not {}", tp));
    e.tp = static_cast<uint32_t>(tp);
  }
  if (auto gpus = node.Find("gpus")) {
    TEMPER_ASSIGN_OR_RETURN(std::vector<YamlNode> items, gpus->Items());
    for (const YamlNode& item : items) {
      TEMPER_ASSIGN_OR_RETURN(int64_t g, item.AsInt(0, 63));
      e.gpus.push_back(static_cast<uint32_t>(g));
    }
    if (e.gpus.size() != e.tp) {
      return gpus->Error(fmt::format("lists {} GPUs but tp is {}; give one GPU per rank", e.gpus.size(), e.tp));
    }
  }
  if (auto n = node.Find("kv_memory_fraction")) {
    TEMPER_ASSIGN_OR_RETURN(e.kv_memory_fraction, n->AsDouble(0.05, 0.98));
  }
  if (auto n = node.Find("max_context")) {
    TEMPER_ASSIGN_OR_RETURN(int64_t v, n->AsInt(256, 1 << 20));
    e.max_context = static_cast<uint32_t>(v);
  }
  if (auto n = node.Find("constrained_decoding")) {
    TEMPER_ASSIGN_OR_RETURN(e.constrained_decoding, n->AsBool());
  }
  return e;
}

Result<OpenAIEndpoint> ParseOpenAI(const YamlNode& node) {
  TEMPER_RETURN_IF_ERROR(node.ExpectMapWithKeys(
      {"type", "base_url", "model", "api_key_env", "api_key_file", "timeout", "max_retries", "max_seqs"}));
  OpenAIEndpoint e;
  TEMPER_ASSIGN_OR_RETURN(YamlNode url, node.Require("base_url"));
  TEMPER_ASSIGN_OR_RETURN(e.base_url, url.AsString());
  if (e.base_url.rfind("http://", 0) != 0 && e.base_url.rfind("https://", 0) != 0) {
    return url.Error(fmt::format("'{}' is not an http:// or https:// URL", e.base_url));
  }
  while (!e.base_url.empty() && e.base_url.back() == '/') e.base_url.pop_back();
  TEMPER_ASSIGN_OR_RETURN(YamlNode model, node.Require("model"));
  TEMPER_ASSIGN_OR_RETURN(e.model, model.AsString());
  if (auto n = node.Find("api_key_env")) {
    TEMPER_ASSIGN_OR_RETURN(e.api_key_env, n->AsString());
  }
  if (auto n = node.Find("api_key_file")) {
    if (!e.api_key_env.empty()) return n->Error("set api_key_env or api_key_file, not both");
    TEMPER_ASSIGN_OR_RETURN(e.api_key_file, n->AsPath());
  }
  if (auto n = node.Find("timeout")) {
    TEMPER_ASSIGN_OR_RETURN(e.timeout, n->AsDuration(std::chrono::seconds(1), std::chrono::seconds(3600)));
  }
  if (auto n = node.Find("max_retries")) {
    TEMPER_ASSIGN_OR_RETURN(int64_t v, n->AsInt(0, 20));
    e.max_retries = static_cast<uint32_t>(v);
  }
  if (auto n = node.Find("max_seqs")) {
    // The server's --max-num-seqs (vLLM): how many requests it decodes at once. 1024 is vLLM's
    // own largest default; beyond it the number is more likely a typo than a server.
    TEMPER_ASSIGN_OR_RETURN(int64_t v, n->AsInt(1, 1024));
    e.max_seqs = static_cast<uint32_t>(v);
  }
  return e;
}

Result<ReplayEndpoint> ParseReplay(const YamlNode& node) {
  TEMPER_RETURN_IF_ERROR(node.ExpectMapWithKeys({"type", "transcript"}));
  ReplayEndpoint e;
  TEMPER_ASSIGN_OR_RETURN(YamlNode t, node.Require("transcript"));
  TEMPER_ASSIGN_OR_RETURN(e.transcript, t.AsPath());
  return e;
}

Result<EndpointConfig> ParseEndpoint(const std::string& name, const YamlNode& node) {
  TEMPER_RETURN_IF_ERROR(node.ExpectMap());
  TEMPER_ASSIGN_OR_RETURN(YamlNode type_node, node.Require("type"));
  TEMPER_ASSIGN_OR_RETURN(std::string type, type_node.AsString());
  EndpointConfig e;
  e.name = name;
  if (type == "inprocess") {
    TEMPER_ASSIGN_OR_RETURN(e.spec, ParseInprocess(node));
  } else if (type == "openai") {
    TEMPER_ASSIGN_OR_RETURN(e.spec, ParseOpenAI(node));
  } else if (type == "replay") {
    TEMPER_ASSIGN_OR_RETURN(e.spec, ParseReplay(node));
  } else {
    return type_node.Error(fmt::format("unknown endpoint type '{}' (expected inprocess, openai or replay)", type));
  }
  return e;
}

Result<RoleConfig> ParseRole(const std::string& role, const YamlNode& node,
                             const std::map<std::string, EndpointConfig>& endpoints) {
  TEMPER_RETURN_IF_ERROR(node.ExpectMapWithKeys(
      {"endpoint", "temperature", "top_p", "top_k", "min_p", "seed", "max_output_tokens", "context_tokens"}));
  RoleConfig r;
  r.role = role;
  TEMPER_ASSIGN_OR_RETURN(YamlNode ep, node.Require("endpoint"));
  TEMPER_ASSIGN_OR_RETURN(r.endpoint, ep.AsString());
  if (endpoints.count(r.endpoint) == 0) {
    std::string known;
    for (const auto& [name, unused] : endpoints) known += fmt::format("{}{}", known.empty() ? "" : ", ", name);
    return ep.Error(fmt::format("no endpoint named '{}' (defined: {})", r.endpoint, known.empty() ? "none" : known));
  }
  if (auto n = node.Find("temperature")) {
    TEMPER_ASSIGN_OR_RETURN(r.sampling.temperature, n->AsDouble(0.0, 2.0));
  }
  if (auto n = node.Find("top_p")) {
    TEMPER_ASSIGN_OR_RETURN(r.sampling.top_p, n->AsDouble(0.0, 1.0));
    if (r.sampling.top_p == 0.0) return n->Error("top_p must be above 0");
  }
  if (auto n = node.Find("top_k")) {
    TEMPER_ASSIGN_OR_RETURN(int64_t v, n->AsInt(0, 1 << 20));
    r.sampling.top_k = static_cast<uint32_t>(v);
  }
  if (auto n = node.Find("min_p")) {
    TEMPER_ASSIGN_OR_RETURN(r.sampling.min_p, n->AsDouble(0.0, 1.0));
  }
  if (auto n = node.Find("seed")) {
    TEMPER_ASSIGN_OR_RETURN(int64_t v, n->AsInt(0, INT64_MAX));
    r.sampling.seed = static_cast<uint64_t>(v);
  }
  std::optional<YamlNode> max_out = node.Find("max_output_tokens");
  if (max_out) {
    TEMPER_ASSIGN_OR_RETURN(int64_t v, max_out->AsInt(16, 1 << 20));
    r.max_output_tokens = static_cast<uint32_t>(v);
  }
  if (auto n = node.Find("context_tokens")) {
    TEMPER_ASSIGN_OR_RETURN(int64_t v, n->AsInt(512, 1 << 22));
    r.context_tokens = static_cast<uint32_t>(v);
    if (r.max_output_tokens >= r.context_tokens) {
      return n->Error(
          fmt::format("context_tokens ({}) must exceed max_output_tokens ({})", r.context_tokens, r.max_output_tokens));
    }
  }
  return r;
}

Result<ModelsConfig> ParseModelsConfigNode(const YamlNode& root) {
  if (root.IsNull()) return root.Error("the file is empty; see config/models.yaml for an example");
  TEMPER_RETURN_IF_ERROR(root.ExpectMapWithKeys({"endpoints", "roles"}));
  ModelsConfig config;
  config.source = root.file();
  TEMPER_ASSIGN_OR_RETURN(YamlNode endpoints, root.Require("endpoints"));
  TEMPER_RETURN_IF_ERROR(endpoints.ExpectMap());
  for (const auto& [name, node] : endpoints.Entries()) {
    TEMPER_ASSIGN_OR_RETURN(EndpointConfig e, ParseEndpoint(name, node));
    config.endpoints.emplace(name, std::move(e));
  }
  TEMPER_ASSIGN_OR_RETURN(YamlNode roles, root.Require("roles"));
  TEMPER_RETURN_IF_ERROR(roles.ExpectMapWithKeys({"architect", "worker", "reflector"}));
  for (const char* role : ModelsConfig::kRoleNames) {
    TEMPER_ASSIGN_OR_RETURN(YamlNode node, roles.Require(role));
    TEMPER_ASSIGN_OR_RETURN(RoleConfig r, ParseRole(role, node, config.endpoints));
    config.roles.emplace(role, std::move(r));
  }
  return config;
}

}  // namespace

Result<ModelsConfig> LoadModelsConfig(const std::string& path) {
  TEMPER_ASSIGN_OR_RETURN(YamlNode root, YamlNode::LoadFile(path));
  return ParseModelsConfigNode(root);
}

Result<ModelsConfig> ParseModelsConfig(const std::string& text, const std::string& source_name) {
  TEMPER_ASSIGN_OR_RETURN(YamlNode root, YamlNode::LoadString(text, source_name));
  return ParseModelsConfigNode(root);
}

}  // namespace temper
