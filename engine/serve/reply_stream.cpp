#include "engine/serve/reply_stream.h"

#include <utility>

#include "engine/serve/json_reply_stream_parser.h"
#include "engine/serve/reply_stream_parser.h"

namespace temper::engine {

std::unique_ptr<ReplyStream> NewReplyStream(const ChatFormat& format, std::vector<std::string> tool_names) {
  if (format.tool_call_syntax() == ToolCallSyntax::kJsonObject) {
    return std::make_unique<JsonReplyStreamParser>(format, std::move(tool_names));
  }
  // Gemma 4's calls are delimited by tokens; which tools they name is the grammar's business.
  return std::make_unique<ReplyStreamParser>(format);
}

}  // namespace temper::engine
