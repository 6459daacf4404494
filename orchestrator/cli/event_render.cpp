#include "orchestrator/cli/event_render.h"

#include <fmt/format.h>

#include "orchestrator/cli/render.h"
#include "orchestrator/journal_event_types.h"

namespace temper::cli {

std::string DescribeEvent(const temper::v1::JournalEvent& e) {
  return EventSentence(e.type(), e.rule_id(), e.target(), e.data_json());
}

std::string RenderEvent(const temper::v1::JournalEvent& e) {
  std::string out = fmt::format("{:>6}  {}  ", e.seq(), FormatTime(e.time()));
  out += e.batch_id().empty() ? "-" : "batch " + e.batch_id();
  if (!e.role().empty()) out += "  [" + e.role() + "]";
  out += "  " + DescribeEvent(e);
  if (e.usage().prompt_tokens() + e.usage().completion_tokens() > 0) {
    out += fmt::format("  ({} + {} tokens)", e.usage().prompt_tokens(), e.usage().completion_tokens());
  }
  return out + "\n";
}

}  // namespace temper::cli
