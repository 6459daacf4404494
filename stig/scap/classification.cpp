#include "stig/scap/classification.h"

#include <algorithm>
#include <array>

namespace temper::stig {
namespace {

// OVAL 5.11 test types that read the running system. systemdunit* use D-Bus; partition reads
// /proc/mounts; sysctl, interface, routingtable, process* and the listener probes query the
// kernel (OpenSCAP 1.3.7 has no offline mode for them); shadow has no offline mode in 1.3.7;
// runlevel asks init; selinuxboolean asks the loaded policy. uname is deliberately absent: SSG
// uses it only to tell 32- from 64-bit machines in audit rules, whose verdict then rests on the
// rules files (measured: audit_rules_* give pass/fail on a rootfs).
constexpr std::array<std::string_view, 15> kLiveOnly = {
    "systemdunitproperty",
    "systemdunitdependency",
    "partition",
    "sysctl",
    "interface",
    "routingtable",
    "process",
    "process58",
    "inetlisteningservers",
    "inetlisteningserver",
    "iflisteners",
    "shadow",
    "runlevel",
    "selinuxboolean",
    "environmentvariable58",
};

}  // namespace

std::string_view DecidabilityName(Decidability d) {
  switch (d) {
    case Decidability::kRootfs:
      return "rootfs";
    case Decidability::kLiveHost:
      return "live";
    case Decidability::kManual:
      return "manual";
  }
  return "?";
}

bool IsLiveOnlyTestType(std::string_view test_type) {
  return std::find(kLiveOnly.begin(), kLiveOnly.end(), test_type) != kLiveOnly.end();
}

Classification Classify(const std::vector<std::string>& test_types, bool has_oval_check) {
  Classification c;
  if (!has_oval_check) return c;
  for (const auto& t : test_types) {
    if (IsLiveOnlyTestType(t)) c.live_test_types.push_back(t);
  }
  std::sort(c.live_test_types.begin(), c.live_test_types.end());
  c.live_test_types.erase(std::unique(c.live_test_types.begin(), c.live_test_types.end()), c.live_test_types.end());
  c.decidability = c.live_test_types.empty() ? Decidability::kRootfs : Decidability::kLiveHost;
  return c;
}

}  // namespace temper::stig
