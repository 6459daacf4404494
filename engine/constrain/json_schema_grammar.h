// JsonSchemaGrammar: the Grammar (grammar.h) of the JSON texts a JSON schema accepts, for
// `response_format: {type: json_schema}` and for tool arguments.
//
// Supported: type (one or a list) object, array, string, integer, number, boolean, null;
// properties with required (properties come in the schema's order, kept by ordered_json; optional
// ones may be left out;
// additional properties are not generated); items, minItems 0 or 1; enum and const (any JSON
// values, written compactly); anyOf and oneOf (as alternatives). An empty schema, or an object
// without properties, is any JSON value. Whitespace is at most one space after ':' and ',' (JSON
// allows more, but a model that may add spaces forever can spend its budget on them).
// Anything else ($ref, pattern, format, minimum, ...) is refused by name and path rather than
// silently widened: a constraint that does not constrain is worse than an error.
//
// Thread safety: pure functions.
#pragma once

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "engine/constrain/grammar.h"

namespace temper::engine {

// InvalidArgument naming the JSON pointer and keyword of the first unsupported part
// ("schema/properties/cmd: 'pattern' is not supported").
Result<Grammar> JsonSchemaGrammar(const nlohmann::ordered_json& schema);

}  // namespace temper::engine
