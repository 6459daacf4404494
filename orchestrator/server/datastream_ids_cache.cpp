#include "orchestrator/server/datastream_ids_cache.h"

#include <sys/stat.h>

#include <cerrno>

namespace temper {

Result<std::shared_ptr<const stig::DatastreamIds>> DatastreamIdsCache::Get(const std::string& path) {
  std::lock_guard lock(mu_);
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return stig::ReadDatastreamIds(path).status();  // its NotFound
  auto it = entries_.find(path);
  if (it != entries_.end() && it->second.size == st.st_size && it->second.mtime.tv_sec == st.st_mtim.tv_sec &&
      it->second.mtime.tv_nsec == st.st_mtim.tv_nsec) {
    return it->second.ids;
  }
  TEMPER_ASSIGN_OR_RETURN(stig::DatastreamIds ids, stig::ReadDatastreamIds(path));
  Entry& e = entries_[path];
  e = Entry{.size = st.st_size,
            .mtime = st.st_mtim,
            .ids = std::make_shared<const stig::DatastreamIds>(std::move(ids))};
  return e.ids;
}

}  // namespace temper
