#include "orchestrator/loop/proven_fix.h"

#include <charconv>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "orchestrator/library/fix_library.h"

namespace temper {

namespace {

constexpr std::string_view kProvenFix = "proven fix ";

// Reads a positive decimal id at the front of `text`, moving past it.
std::optional<int64_t> TakeId(std::string_view& text) {
  int64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || value <= 0) return std::nullopt;
  text.remove_prefix(static_cast<size_t>(end - text.data()));
  return value;
}

bool Take(std::string_view& text, std::string_view literal) {
  if (!text.starts_with(literal)) return false;
  text.remove_prefix(literal.size());
  return true;
}

}  // namespace

std::string LibraryFixApproach(int64_t fix_id, int64_t source_batch) {
  return fmt::format("proven fix #{} from the library (batch {})", fix_id, source_batch);
}

std::string ApplyFixApproach(int64_t source_batch, int64_t source_attempt) {
  return fmt::format("proven fix of batch {} (attempt {})", source_batch, source_attempt);
}

std::optional<ProvenFixSource> ParseProvenFixApproach(std::string_view approach) {
  if (!Take(approach, kProvenFix)) return std::nullopt;
  ProvenFixSource out;
  if (Take(approach, "#")) {
    std::optional<int64_t> fix = TakeId(approach);
    if (!fix || !Take(approach, " from the library (batch ")) return std::nullopt;
    std::optional<int64_t> batch = TakeId(approach);
    if (!batch || approach != ")") return std::nullopt;
    out.library_fix = *fix;
    out.source_batch = *batch;
    return out;
  }
  if (!Take(approach, "of batch ")) return std::nullopt;
  std::optional<int64_t> batch = TakeId(approach);
  if (!batch || !Take(approach, " (attempt ")) return std::nullopt;
  std::optional<int64_t> attempt = TakeId(approach);
  if (!attempt || approach != ")") return std::nullopt;
  out.source_batch = *batch;
  out.source_attempt = *attempt;
  return out;
}

nlohmann::json LibraryUse::ToJson() const { return {{"tried", tried}, {"kept", kept}, {"tokens_saved", tokens_saved}}; }

void ToProto(const LibraryUse& use, temper::v1::LibraryUse* out) {
  out->set_tried(use.tried);
  out->set_kept(use.kept);
  out->set_tokens_saved(use.tokens_saved);
}

Result<LibraryUse> BatchLibraryUse(StateStore& store, int64_t batch_id) {
  TEMPER_ASSIGN_OR_RETURN(std::vector<AttemptRecord> attempts, store.BatchAttempts(batch_id));
  LibraryUse out;
  std::set<std::string> tried;
  FixLibrary library(store);
  for (const AttemptRecord& a : attempts) {
    std::optional<ProvenFixSource> source = ParseProvenFixApproach(a.approach);
    if (!source || source->library_fix == 0) continue;
    tried.insert(a.rule_id);
    if (a.outcome != AttemptOutcome::kKept) continue;
    ++out.kept;
    Result<FixRecord> entry = library.Get(source->library_fix);
    if (entry.ok()) {
      out.tokens_saved += entry->model_tokens;
    } else if (entry.status().code() != StatusCode::kNotFound) {
      return entry.status();
    }
  }
  out.tried = static_cast<uint32_t>(tried.size());
  return out;
}

}  // namespace temper
