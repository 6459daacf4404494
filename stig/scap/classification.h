// Classification: can a rule be decided on a root file system, or does it need a live host?
//
// A rootfs target has files and a dpkg database but no running kernel, systemd or mounts. OVAL
// tests that read files (textfilecontent54, file, dpkginfo, ...) give the same verdict there as on
// a booted host; tests that ask the running system (systemd units over D-Bus, /proc/mounts, runtime
// sysctl, uname, interfaces, processes) cannot, and OpenSCAP 1.3.7 leaves several of them
// unimplemented offline (probe-table.c: sysctl, uname, shadow have no offline mode). We classify each rule by
// the OVAL test types reachable from its check, so reports and scores can count the decidable ones
// apart from the rest. Thread safety: pure functions.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace temper::stig {

enum class Decidability {
  kRootfs,    // every reachable OVAL test reads static state: files, permissions, packages
  kLiveHost,  // at least one test needs the running system
  kManual,    // no OVAL check at all (OCIL only): OpenSCAP reports notchecked
};

// "rootfs", "live", "manual".
std::string_view DecidabilityName(Decidability d);

struct Classification {
  Decidability decidability = Decidability::kManual;
  // The OVAL test types that made it live, sorted; empty unless kLiveHost.
  std::vector<std::string> live_test_types;
};

// True for the OVAL test types (as oval_subtype_get_text names them, e.g. "sysctl",
// "systemdunitproperty") whose answer depends on the running system.
bool IsLiveOnlyTestType(std::string_view test_type);

// Classifies a rule from the test types reachable from its OVAL definition (extended definitions
// included). `has_oval_check` is false for rules without an OVAL check.
Classification Classify(const std::vector<std::string>& test_types, bool has_oval_check);

}  // namespace temper::stig
