// libFuzzer entry point for everything in roles/ that reads model or server output: text tool-call
// extraction, JSON answer extraction, argument resolution, and the OpenAI reply / SSE stream
// parsers (the command policy has a target of its own, command_policy_fuzz.cpp). Any input must
// give a value or an error Status of the documented kind; never a crash, a hang, a leak or an
// out-of-bounds read (ASan/UBSan watch).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "roles/openai_wire.h"
#include "roles/tool_call_parser.h"
#include "roles/tool_calls.h"
#include "roles/worker.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace temper;
  const std::string_view text(reinterpret_cast<const char*>(data), size);

  auto calls = ExtractToolCallsFromText(text);
  if (!calls.ok() && calls.status().code() != StatusCode::kInvalidArgument) std::abort();
  auto object = ExtractJsonObject(text);
  if (!object.ok() && object.status().code() != StatusCode::kInvalidArgument) std::abort();

  ChatResponse response;
  response.text = std::string(text);
  auto resolved = ResolveToolCalls(response, Worker::Tools());
  if (!resolved.ok() && resolved.status().code() != StatusCode::kInvalidArgument) std::abort();

  auto reply = ParseOpenAIResponse(text);
  if (!reply.ok() && reply.status().code() != StatusCode::kDataLoss &&
      reply.status().code() != StatusCode::kUnavailable) {
    std::abort();
  }
  SseDecoder sse;
  StreamAccumulator acc;
  std::vector<std::string> events;
  sse.Feed(text.substr(0, size / 2), &events);
  sse.Feed(text.substr(size / 2), &events);
  for (const std::string& e : events) {
    if (!acc.Feed(e, nullptr).ok()) break;
  }
  (void)acc.Finish();
  return 0;
}
