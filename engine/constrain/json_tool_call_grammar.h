// JsonToolCallGrammar: the grammar of a reply that calls tools in JSON, for chat formats without
// tool-call tokens of their own (Gemma 3, engine/tokenizer/gemma3_chat_format.h): the whole reply
// is one object {"name":"NAME","arguments":{...}} — NAME one of the tools offered, as a literal,
// and the arguments an instance of that tool's parameters schema (json_schema_grammar.h,
// SchemaDialect::kJson), one alternative per tool — or, when several calls are allowed, a JSON
// array of such objects. A space may follow each ':' and ',' of the wrapper, as the schema's own
// JSON allows.
//
// With `allow_text` (tool_choice auto) the reply may instead be plain text: empty, or any text
// whose first byte is neither '{', '[' nor whitespace. So the two never overlap: a reply that
// starts a JSON object or array is a call and must complete as one, and Gemma3ChatFormat's parser
// (a reply that is exactly such an object is a call) reads every reply of the grammar as the
// grammar meant it.
//
// Thread safety: pure functions.
#pragma once

#include <span>

#include "common/status.h"
#include "engine/constrain/grammar.h"
#include "engine/constrain/tool_call_grammar.h"

namespace temper::engine {

struct JsonToolCallOptions {
  bool allow_text = false;    // plain text is a reply too (tool_choice auto)
  bool allow_several = true;  // an array of calls is a reply too (parallel_tool_calls)
};

// Each tool's $refs resolve in its own parameters. Errors: InvalidArgument for no tools, a name
// CheckToolName refuses, parameters that are not an object schema, or an unsupported schema keyword,
// naming the tool ("tools[1] 'run'.parameters/properties/n: 'multipleOf' is not supported").
Result<Grammar> JsonToolCallGrammar(std::span<const ToolSchema> tools, JsonToolCallOptions options = {});

}  // namespace temper::engine
