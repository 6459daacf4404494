#include "orchestrator/loop/plan_only.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "orchestrator/journal_event_types.h"

namespace temper {

Result<bool> RevertEndedPlan(Journal& journal, stig::Target& target, const std::string& target_name) {
  TEMPER_ASSIGN_OR_RETURN(std::optional<BatchRecord> last, journal.store().LastStartedBatch(target_name));
  if (!last || !last->options.plan_only || !IsFinal(last->state) || !last->start_snapshot) return false;
  const stig::SnapshotId start = *last->start_snapshot;
  TEMPER_ASSIGN_OR_RETURN(std::vector<stig::SnapshotId> held, target.Snapshots());
  TEMPER_ASSIGN_OR_RETURN(std::vector<std::string> changed, target.UnsnapshottedPaths());
  if ((held.empty() || held.back() <= start) && changed.empty()) return false;
  TEMPER_RETURN_IF_ERROR(target.Revert(start));
  NewEvent event;
  event.batch_id = last->id;
  event.target = target_name;
  event.role = "daemon";
  event.type = EventTypeName(EventType::kBatchPlanReverted);
  event.data_json = nlohmann::json{{"start_snapshot", start},
                                   {"recovered", true},
                                   {"batch_state", std::string(BatchStateName(last->state))}}
                        .dump();
  TEMPER_RETURN_IF_ERROR(journal.Append(event).status());
  return true;
}

}  // namespace temper
