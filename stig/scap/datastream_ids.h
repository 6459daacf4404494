// DatastreamIds: the XCCDF rule and profile ids a SCAP source datastream defines, read in one
// streaming pass (no OpenSCAP load), so that temperd can refuse a batch naming a rule or profile
// the datastream does not have when it is submitted, with a "did you mean", instead of queueing it
// and failing the rule later. About 0.1 s for SSG's 11 MB Ubuntu 20.04 datastream.
//
// Thread safety: a value; ReadDatastreamIds is reentrant.
#pragma once

#include <set>
#include <string>

#include "common/status.h"

namespace temper::stig {

struct DatastreamIds {
  std::set<std::string> rules;     // full XCCDF ids (xccdf_org.ssgproject.content_rule_...)
  std::set<std::string> profiles;  // full XCCDF ids (xccdf_org.ssgproject.content_profile_...)
};

// NotFound when `path` does not exist; DataLoss naming the file when it is not well-formed XML, is
// not a source datastream, or defines no rule.
Result<DatastreamIds> ReadDatastreamIds(const std::string& path);

}  // namespace temper::stig
