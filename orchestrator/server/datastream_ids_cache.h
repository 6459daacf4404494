// DatastreamIdsCache: the rule and profile ids of each datastream submitted batches name, read
// once per version of the file (stig/scap/datastream_ids.h), so SubmitBatch can refuse an unknown
// rule at once without reading 11 MB of XML per request. A file replaced since (another size or
// modification time) is read again.
//
// Thread safety: Get may be called from any thread; readers of one file wait for one read.
#pragma once

#include <ctime>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "common/status.h"
#include "stig/scap/datastream_ids.h"

namespace temper {

class DatastreamIdsCache {
 public:
  // ReadDatastreamIds's errors.
  Result<std::shared_ptr<const stig::DatastreamIds>> Get(const std::string& path);

 private:
  struct Entry {
    off_t size = 0;
    timespec mtime{};
    std::shared_ptr<const stig::DatastreamIds> ids;
  };
  std::mutex mu_;  // held across a read: submits are rare, and two reads of one file are waste
  std::map<std::string, Entry> entries_;
};

}  // namespace temper
