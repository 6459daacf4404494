#include "roles/structured_answer.h"

#include <fmt/format.h>

namespace temper {

Status AskStructured(ModelClient& client, ChatRequest request, const std::function<Status(const ChatResponse&)>& parse,
                     int max_corrections, StructuredCall* record) {
  for (int attempt = 0;; ++attempt) {
    TEMPER_ASSIGN_OR_RETURN(ChatResponse response, client.Chat(request, nullptr));
    record->responses.push_back(response);
    Status s = parse(response);
    if (s.ok()) return s;
    if (s.code() != StatusCode::kInvalidArgument) return s;
    if (attempt >= max_corrections) {
      return Status::InvalidArgument(fmt::format("the {} gave no usable answer after {} corrections; last problem: {}",
                                                 request.role_name, max_corrections, s.message()));
    }
    record->corrections.push_back(s.message());
    request.messages.push_back({ChatRole::kAssistant, response.text});
    request.messages.push_back(
        {ChatRole::kUser,
         fmt::format("Your answer could not be used: {}. Answer again with only the JSON object described above.",
                     s.message())});
  }
}

}  // namespace temper
