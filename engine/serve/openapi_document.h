// The OpenAPI 3.1 document of `temper-lm serve`'s HTTP API (openapi.json beside this file), served
// at GET /openapi.json. Compiled in, with the project's version filled in, so the server has no file
// to find at run time; the build makes openapi_document.cpp from the JSON (engine/CMakeLists.txt).
// Its request parameters are exactly those of openai_parameters.h (a test holds them together).
#pragma once

#include <string_view>

namespace temper::engine {

extern const std::string_view kOpenApiDocument;

}  // namespace temper::engine
