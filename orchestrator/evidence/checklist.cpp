#include "orchestrator/evidence/checklist.h"

#include <cstdint>

#include <fmt/format.h>

namespace temper::evidence {
namespace {

constexpr ChecklistStatus kStatuses[] = {ChecklistStatus::kNotAFinding, ChecklistStatus::kOpen,
                                         ChecklistStatus::kNotApplicable, ChecklistStatus::kNotReviewed};

}  // namespace

std::string_view CklStatusName(ChecklistStatus s) {
  switch (s) {
    case ChecklistStatus::kNotAFinding:
      return "NotAFinding";
    case ChecklistStatus::kOpen:
      return "Open";
    case ChecklistStatus::kNotApplicable:
      return "Not_Applicable";
    case ChecklistStatus::kNotReviewed:
      return "Not_Reviewed";
  }
  return "Not_Reviewed";
}

std::string_view CklbStatusName(ChecklistStatus s) {
  switch (s) {
    case ChecklistStatus::kNotAFinding:
      return "not_a_finding";
    case ChecklistStatus::kOpen:
      return "open";
    case ChecklistStatus::kNotApplicable:
      return "not_applicable";
    case ChecklistStatus::kNotReviewed:
      return "not_reviewed";
  }
  return "not_reviewed";
}

Result<ChecklistStatus> ParseCklStatus(std::string_view token) {
  for (ChecklistStatus s : kStatuses) {
    if (CklStatusName(s) == token) return s;
  }
  return Status::InvalidArgument(
      fmt::format("\"{}\" is not a checklist status (NotAFinding, Open, Not_Applicable, Not_Reviewed)", token));
}

Result<ChecklistStatus> ParseCklbStatus(std::string_view token) {
  for (ChecklistStatus s : kStatuses) {
    if (CklbStatusName(s) == token) return s;
  }
  return Status::InvalidArgument(
      fmt::format("\"{}\" is not a checklist status (not_a_finding, open, not_applicable, not_reviewed)", token));
}

std::string DerivedUuid(std::string_view seed) {
  // 128 bits of FNV-1a (two differently seeded halves); not a cryptographic hash, only a stable one.
  uint64_t h[2] = {0xcbf29ce484222325ull, 0x84222325cbf29ce4ull};
  for (uint64_t& half : h) {
    for (unsigned char c : seed) {
      half ^= c;
      half *= 0x100000001b3ull;
    }
    half ^= half >> 29;
  }
  h[0] = (h[0] & ~0xF000ull) | 0x8000ull;                         // version 8
  h[1] = (h[1] & 0x3FFFFFFFFFFFFFFFull) | 0x8000000000000000ull;  // RFC 9562 variant
  return fmt::format("{:08x}-{:04x}-{:04x}-{:04x}-{:012x}", h[0] >> 32, (h[0] >> 16) & 0xFFFF, h[0] & 0xFFFF,
                     h[1] >> 48, h[1] & 0xFFFFFFFFFFFFull);
}

std::string AttributeOf(const ChecklistAttributes& attributes, std::string_view name) {
  for (const auto& [k, v] : attributes) {
    if (k == name) return v;
  }
  return "";
}

std::vector<std::string> AttributesOf(const ChecklistAttributes& attributes, std::string_view name) {
  std::vector<std::string> out;
  for (const auto& [k, v] : attributes) {
    if (k == name) out.push_back(v);
  }
  return out;
}

}  // namespace temper::evidence
