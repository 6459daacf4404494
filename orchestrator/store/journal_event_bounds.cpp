#include "orchestrator/store/journal_event_bounds.h"

#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/text_cut.h"
#include "orchestrator/store/journal_files.h"

namespace temper {

namespace {

using nlohmann::json;

// Below this the halving stops: shorter cuts would be mostly marker.
constexpr size_t kMinStringCut = 128;
// Lists are cut to at most this many items, halving down to kMinArrayItems, when cutting strings
// is not enough.
constexpr size_t kMaxArrayItems = 1024;
constexpr size_t kMinArrayItems = 4;
// What the last-resort replacement keeps of the original data.
constexpr size_t kPrefixBytes = 4096;

// The bytes of a line that are not the data, for this event, with every number at its longest.
size_t EnvelopeBytes(const NewEvent& e) {
  EventRecord widest{.seq = std::numeric_limits<uint64_t>::max(),
                     .time = std::numeric_limits<int64_t>::max(),
                     .batch_id = std::numeric_limits<int64_t>::max(),
                     .target = e.target,
                     .rule_id = e.rule_id,
                     .role = e.role,
                     .type = e.type,
                     .data_json = "{}",
                     .usage = {std::numeric_limits<uint64_t>::max(), std::numeric_limits<uint64_t>::max(),
                               std::numeric_limits<uint64_t>::max()}};
  return JournalFiles::ToJsonLine(widest).size() - 2;
}

// Cuts every string (and object key) below `data` longer than `cap`. Iterative: the data's depth is
// whatever the event's producer built.
void CutStrings(json& data, size_t cap) {
  std::vector<json*> todo{&data};
  while (!todo.empty()) {
    json* j = todo.back();
    todo.pop_back();
    if (j->is_string()) {
      const std::string& s = j->get_ref<const std::string&>();
      if (s.size() > cap) *j = CutWithMarker(s, cap);
    } else if (j->is_array()) {
      for (json& item : *j) todo.push_back(&item);
    } else if (j->is_object()) {
      bool long_key = false;
      for (auto it = j->begin(); it != j->end(); ++it) long_key = long_key || it.key().size() > cap;
      if (long_key) {
        json rebuilt = json::object();
        for (auto it = j->begin(); it != j->end(); ++it) rebuilt[CutWithMarker(it.key(), cap)] = std::move(it.value());
        *j = std::move(rebuilt);
      }
      for (json& item : *j) todo.push_back(&item);
    }
  }
}

// Cuts every array below `data` longer than `max_items` to its first items and a marker string.
void CutArrays(json& data, size_t max_items) {
  std::vector<json*> todo{&data};
  while (!todo.empty()) {
    json* j = todo.back();
    todo.pop_back();
    if (j->is_array() && j->size() > max_items) {
      const size_t total = j->size();
      j->erase(j->begin() + static_cast<std::ptrdiff_t>(max_items), j->end());
      j->push_back(fmt::format("…[cut by temper: {} of {} items left out]", total - max_items, total));
    }
    if (j->is_structured()) {
      for (json& item : *j) todo.push_back(&item);
    }
  }
}

}  // namespace

NewEvent BoundJournalEvent(NewEvent event) {
  for (std::string* field : {&event.target, &event.rule_id, &event.role, &event.type}) {
    if (field->size() > kMaxEventFieldBytes) *field = CutWithMarker(*field, kMaxEventFieldBytes);
  }
  // Data no longer than one string's cut has no string to cut and fits the line: unchanged.
  if (event.data_json.size() <= kMaxEventStringBytes) return event;
  json data = json::parse(event.data_json, nullptr, /*allow_exceptions=*/false);
  if (data.is_discarded()) return event;  // not JSON: the store refuses it
  const size_t budget = kMaxJournalLineBytes - EnvelopeBytes(event);
  for (size_t cap = kMaxEventStringBytes; cap >= kMinStringCut; cap /= 2) {
    json cut = data;
    CutStrings(cut, cap);
    std::string dumped = EventDataJson(cut);
    if (dumped.size() <= budget) {
      event.data_json = std::move(dumped);
      return event;
    }
  }
  // Short strings, but too many of them (or of anything): lists keep their first items.
  CutStrings(data, kMinStringCut);
  for (size_t items = kMaxArrayItems; items >= kMinArrayItems; items /= 2) {
    json cut = data;
    CutArrays(cut, items);
    std::string dumped = EventDataJson(cut);
    if (dumped.size() <= budget) {
      event.data_json = std::move(dumped);
      return event;
    }
  }
  json replaced = {
      {"truncated",
       {{"original_bytes", event.data_json.size()}, {"prefix", CutWithMarker(event.data_json, kPrefixBytes)}}}};
  event.data_json = EventDataJson(replaced);
  return event;
}

}  // namespace temper
