#include "engine/constrain/tool_call_grammar.h"

#include <fmt/format.h>

#include "engine/tokenizer/chat_format.h"

namespace temper::engine {

Result<int> ToolArgumentsRule(SchemaGrammarBuilder& builder, const ToolSchema& tool, size_t index) {
  const std::string path = fmt::format("tools[{}] '{}'.parameters", index, tool.name);
  TEMPER_RETURN_IF_ERROR(CheckToolName(tool.name, fmt::format("tools[{}]", index)));
  if (tool.parameters.is_null()) return builder.Add(path, {Literal("{}")});
  const auto type = tool.parameters.find("type");
  if (!tool.parameters.is_object() || (type != tool.parameters.end() && *type != "object")) {
    return Status::InvalidArgument(fmt::format("{}: must be an object schema (\"type\": \"object\")", path));
  }
  return builder.Schema(tool.parameters, path);
}

Result<Grammar> ToolCallGrammar(std::span<const ToolSchema> tools) {
  if (tools.empty()) return Status::InvalidArgument("tool calls need at least one tool to call");
  SchemaGrammarBuilder builder(SchemaDialect::kGemmaArguments);
  std::vector<std::vector<GrammarElement>> functions;
  for (size_t i = 0; i < tools.size(); ++i) {
    const ToolSchema& tool = tools[i];
    TEMPER_ASSIGN_OR_RETURN(const int arguments, ToolArgumentsRule(builder, tool, i));
    std::vector<GrammarElement> call = Literal(tool.name);
    call.push_back(Ref(arguments));
    functions.push_back(std::move(call));
  }
  const int function = builder.Add("function", std::move(functions));
  std::vector<GrammarElement> call = {Marker(kCallOpenMarker)};
  for (const GrammarElement& e : Literal("call:")) call.push_back(e);
  call.push_back(Ref(function));
  call.push_back(Marker(kCallCloseMarker));
  const int one = builder.Add("tool-call", {call});
  const int calls = builder.Add("tool-calls", {});
  Grammar grammar = builder.Finish(calls);
  grammar.rules[static_cast<size_t>(calls)].alternatives = {{Ref(one)}, {Ref(one), Ref(calls)}};
  return grammar;
}

}  // namespace temper::engine
