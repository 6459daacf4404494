#include "engine/constrain/json_tool_call_grammar.h"

#include <fmt/format.h>

#include "engine/constrain/json_schema_grammar.h"
#include "engine/tokenizer/chat_format.h"

namespace temper::engine {
namespace {

void Append(std::vector<GrammarElement>& to, const std::vector<GrammarElement>& from) {
  to.insert(to.end(), from.begin(), from.end());
}

}  // namespace

Result<Grammar> JsonToolCallGrammar(std::span<const ToolSchema> tools, JsonToolCallOptions options) {
  if (tools.empty()) return Status::InvalidArgument("tool calls need at least one tool to call");
  SchemaGrammarBuilder builder(SchemaDialect::kJson);
  const int space = builder.Add("space?", {{Chars(Bytes(" "))}, {}});
  std::vector<std::vector<GrammarElement>> calls;
  for (size_t i = 0; i < tools.size(); ++i) {
    const ToolSchema& tool = tools[i];
    TEMPER_ASSIGN_OR_RETURN(const int arguments, ToolArgumentsRule(builder, tool, i));
    // {"name": "NAME", "arguments": ARGS}; names need no JSON escapes (CheckToolName).
    std::vector<GrammarElement> call = Literal("{\"name\":");
    call.push_back(Ref(space));
    Append(call, Literal(fmt::format("\"{}\",", tool.name)));
    call.push_back(Ref(space));
    Append(call, Literal("\"arguments\":"));
    call.push_back(Ref(space));
    call.push_back(Ref(arguments));
    Append(call, Literal("}"));
    calls.push_back(std::move(call));
  }
  const int call = builder.Add("tool-call", std::move(calls));
  std::vector<std::vector<GrammarElement>> replies = {{Ref(call)}};

  // Recursive rules are added with an empty alternative and given their real ones after Finish,
  // which would otherwise drop what refers to a rule not yet defined.
  int more_calls = -1;
  if (options.allow_several) {
    more_calls = builder.Add("more-calls", {{}});
    std::vector<GrammarElement> array = Literal("[");
    array.push_back(Ref(call));
    array.push_back(Ref(more_calls));
    Append(array, Literal("]"));
    replies.push_back(std::move(array));
  }
  int text_rest = -1;
  if (options.allow_text) {
    text_rest = builder.Add("text-rest", {{}});
    replies.push_back({Chars(AnyByteExcept("{[ \t\n\r\f\v")), Ref(text_rest)});
    replies.push_back({});  // an empty reply
  }
  const int reply = builder.Add("reply", std::move(replies));
  Grammar grammar = builder.Finish(reply);
  if (more_calls >= 0) {
    std::vector<GrammarElement> more = Literal(",");
    more.push_back(Ref(space));
    more.push_back(Ref(call));
    more.push_back(Ref(more_calls));
    grammar.rules[static_cast<size_t>(more_calls)].alternatives = {std::move(more), {}};
  }
  if (text_rest >= 0) {
    grammar.rules[static_cast<size_t>(text_rest)].alternatives = {{Chars(TextBytes()), Ref(text_rest)}, {}};
  }
  return grammar;
}

}  // namespace temper::engine
