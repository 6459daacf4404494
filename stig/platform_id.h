// TargetPlatform: what a target runs, as far as a proven fix depends on it — the OS (os-release's
// ID and VERSION_ID), the architecture (dpkg's) and the installed packages with their versions —
// read from the target through its own file reads, so a rootfs twin and an SSH host are read alike.
//
// The library of proven fixes (orchestrator/library/fix_library.h) records the platform a fix was
// proven on and tries the fix only on targets whose platform matches.
// JSON form: {"os":"ubuntu","version":"20.04","arch":"amd64","packages":{"aide":"0.17.4-1",...}}.
// Thread safety: plain values; ReadTargetPlatform drives one Target.
#pragma once

#include <map>
#include <string>
#include <string_view>

#include "common/status.h"
#include "stig/target.h"

namespace temper::stig {

struct TargetPlatform {
  std::string os;       // os-release ID ("ubuntu"), lower case
  std::string version;  // os-release VERSION_ID ("20.04")
  std::string arch;     // dpkg's architecture ("amd64")
  std::map<std::string, std::string> packages;  // installed, name -> version (dpkg_status.h)

  // "ubuntu 20.04 amd64"
  std::string Label() const;
  std::string ToJson() const;
  // InvalidArgument naming the field.
  static Result<TargetPlatform> FromJson(std::string_view json);
  bool operator==(const TargetPlatform&) const = default;
};

// Reads /etc/os-release (or /usr/lib/os-release), /var/lib/dpkg/status and dpkg's architecture
// (/var/lib/dpkg/arch, else the architecture of the packages marked Essential) from `target`.
// FailedPrecondition naming the file when the target has no os-release ID or no dpkg status:
// a platform that cannot be told is never matched.
Result<TargetPlatform> ReadTargetPlatform(Target& target);

}  // namespace temper::stig
