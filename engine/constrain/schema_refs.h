// Local `$ref`s in JSON schemas, as clients write them: pydantic's "#/$defs/Model", zod's and older
// generators' "#/definitions/X", and "#" for the whole schema (a recursive root). Two readers: the
// grammar compiler (json_schema_grammar.h), which follows a ref into the schema it sits in — for a
// tool, that tool's own parameters; and the prompt, where Gemma 4's chat template renders a tool's
// parameters property by property and knows no `$ref`: RenderableToolSchema writes them out.
//
// Thread safety: pure functions.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace temper::engine {

// What the `$ref` value `ref` points to in `root`: "#", or "#" and a JSON pointer (RFC 6901, with
// ~0 ~1 and %XX unescaped). `path` names the schema holding the ref, for errors. Errors:
// InvalidArgument for a ref that is not a string, a remote one ("other.json#/x", "https://..."),
// an anchor ("#foo"), or one that points to nothing ("schema/properties/a/$ref: '#/$defs/B' points
// to nothing in the schema"). The pointer stays valid while `root` lives unchanged.
Result<const nlohmann::ordered_json*> ResolveLocalRef(const nlohmann::ordered_json& root,
                                                      const nlohmann::ordered_json& ref, const std::string& path);

// `parameters` as the chat template can render them: every local `$ref` replaced by what it points
// to (a ref met again inside its own expansion, a recursion, becomes its target's type and
// description only), `$defs`/`definitions` dropped, `allOf` of one schema merged into its place,
// and a union with null — anyOf/oneOf of X and {"type": "null"}, or "type": [X, "null"] — written
// as X with "nullable": true, the template's own spelling. Errors: ResolveLocalRef's, under `path`.
Result<nlohmann::json> RenderableToolSchema(const nlohmann::json& parameters, const std::string& path);

}  // namespace temper::engine
