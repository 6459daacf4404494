// Datastreams: temperd's one reader of SCAP source datastreams, for the two things it asks of them.
// A submit asks for a datastream's ids, to refuse a rule or profile it lacks at once: the light
// streaming pass (stig/scap/datastream_ids.h, about 0.1 s for SSG's 11 MB file) instead of
// OpenSCAP's load per request. A batch asks for its profile's content and an evaluator: OpenSCAP's
// load (seconds). Each is read once per version of the file (its size and modification time), so
// a datastream replaced since is read again, for submits and for the batches that start after.
//
// Lifetime: content loaded for an earlier version of a file stays until the Datastreams is
// destroyed, since batches that started on it hold references to it.
// Thread safety: every method may be called from any thread. Readers of one file's ids wait for one
// read; content loads are serialised (libopenscap requires it) and do not hold up ids.
#pragma once

#include <sys/types.h>

#include <ctime>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "common/log.h"
#include "common/status.h"
#include "stig/scap/content.h"
#include "stig/scap/datastream_ids.h"
#include "stig/scap/evaluator.h"

namespace temper {

class Datastreams {
 public:
  // A profile's content and the evaluator over it.
  struct Loaded {
    stig::Content content;
    std::unique_ptr<stig::Evaluator> evaluator;
  };

  // `log` is the evaluators'; it must outlive this object.
  explicit Datastreams(const Logger& log) : log_(log) {}

  // The rule and profile ids of the datastream at `path` (absolute, already trusted:
  // stig/scap/content_trust.h). ReadDatastreamIds's errors: NotFound, DataLoss naming the file.
  Result<std::shared_ptr<const stig::DatastreamIds>> Ids(const std::string& path);

  // `profile`'s content in the datastream at `path` (as Ids), with an evaluator; Content::Load's
  // errors. The pointer stays valid for this object's life.
  Result<const Loaded*> Content(const std::string& path, const std::string& profile);

 private:
  struct Version {
    off_t size = 0;
    timespec mtime{};
    bool operator==(const Version& o) const {
      return size == o.size && mtime.tv_sec == o.mtime.tv_sec && mtime.tv_nsec == o.mtime.tv_nsec;
    }
  };
  // NotFound (ReadDatastreamIds's, naming the file) when `path` cannot be read.
  static Result<Version> VersionOf(const std::string& path);

  const Logger& log_;
  std::mutex ids_mu_;  // held across a read: submits are rare, and two reads of one file are waste
  std::map<std::string, std::pair<Version, std::shared_ptr<const stig::DatastreamIds>>> ids_;
  std::mutex content_mu_;  // also serialises Content::Load, which libopenscap requires
  std::map<std::pair<std::string, std::string>, std::pair<Version, const Loaded*>> contents_;  // by path, profile
  std::vector<std::unique_ptr<Loaded>> loaded_;  // every version loaded, for the references handed out
};

}  // namespace temper
