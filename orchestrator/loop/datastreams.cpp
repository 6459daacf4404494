#include "orchestrator/loop/datastreams.h"

#include <sys/stat.h>

namespace temper {

Result<Datastreams::Version> Datastreams::VersionOf(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return stig::ReadDatastreamIds(path).status();  // its NotFound
  return Version{.size = st.st_size, .mtime = st.st_mtim};
}

Result<std::shared_ptr<const stig::DatastreamIds>> Datastreams::Ids(const std::string& path) {
  std::lock_guard lock(ids_mu_);
  TEMPER_ASSIGN_OR_RETURN(Version version, VersionOf(path));
  auto it = ids_.find(path);
  if (it != ids_.end() && it->second.first == version) return it->second.second;
  TEMPER_ASSIGN_OR_RETURN(stig::DatastreamIds ids, stig::ReadDatastreamIds(path));
  auto& entry = ids_[path];
  entry = {version, std::make_shared<const stig::DatastreamIds>(std::move(ids))};
  return entry.second;
}

Result<const Datastreams::Loaded*> Datastreams::Content(const std::string& path, const std::string& profile) {
  std::lock_guard lock(content_mu_);
  TEMPER_ASSIGN_OR_RETURN(Version version, VersionOf(path));
  auto key = std::make_pair(path, profile);
  auto it = contents_.find(key);
  if (it != contents_.end() && it->second.first == version) return it->second.second;
  TEMPER_ASSIGN_OR_RETURN(stig::Content content, stig::Content::Load(path, profile));
  auto loaded = std::make_unique<Loaded>(Loaded{std::move(content), nullptr});
  loaded->evaluator = std::make_unique<stig::Evaluator>(loaded->content, stig::EvaluatorOptions{}, log_);
  loaded_.push_back(std::move(loaded));
  contents_[key] = {version, loaded_.back().get()};
  return loaded_.back().get();
}

}  // namespace temper
