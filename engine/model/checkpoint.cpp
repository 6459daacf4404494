#include "engine/model/checkpoint.h"

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

namespace temper::engine {

Status Checkpoint::Add(const SafetensorsFile& file) {
  for (const TensorInfo& t : file.header().tensors) {
    auto [it, inserted] = tensors_.emplace(t.name, Entry{&t, &file, file.Data(t)});
    if (!inserted) {
      return Status::DataLoss(fmt::format("tensor '{}' is in both {} and {}", t.name, it->second.file->path().string(),
                                          file.path().string()));
    }
  }
  return Status::OK();
}

Result<std::unique_ptr<Checkpoint>> Checkpoint::Open(const std::filesystem::path& dir) {
  std::unique_ptr<Checkpoint> ckpt(new Checkpoint());
  ckpt->dir_ = dir;
  const std::filesystem::path index_path = dir / "model.safetensors.index.json";
  const std::filesystem::path single_path = dir / "model.safetensors";
  std::error_code ec;
  if (!std::filesystem::exists(index_path, ec)) {
    if (!std::filesystem::exists(single_path, ec)) {
      return Status::NotFound(
          fmt::format("{}: neither model.safetensors nor model.safetensors.index.json exists", dir.string()));
    }
    TEMPER_ASSIGN_OR_RETURN(SafetensorsFile file, SafetensorsFile::Open(single_path));
    ckpt->files_.push_back(std::make_unique<SafetensorsFile>(std::move(file)));
    TEMPER_RETURN_IF_ERROR(ckpt->Add(*ckpt->files_.back()));
    return ckpt;
  }

  std::ifstream in(index_path, std::ios::binary);
  if (!in) return Status::FromErrno(errno, fmt::format("cannot open {}", index_path.string()));
  std::ostringstream text;
  text << in.rdbuf();
  const std::string name = index_path.string();
  nlohmann::json index = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (index.is_discarded()) return Status::DataLoss(fmt::format("{}: bad JSON", name));
  if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object()) {
    return Status::DataLoss(fmt::format("{}: no 'weight_map' object", name));
  }
  const nlohmann::json& map = index["weight_map"];
  std::set<std::string> shards;
  for (auto it = map.begin(); it != map.end(); ++it) {
    if (!it->is_string())
      return Status::DataLoss(fmt::format("{}: weight_map['{}'] is not a file name", name, it.key()));
    const std::string shard = it->get<std::string>();
    // Shards live beside the index; a path that leaves the directory is not a shard.
    if (shard.empty() || shard.find('/') != std::string::npos || shard == "." || shard == "..") {
      return Status::DataLoss(
          fmt::format("{}: weight_map['{}'] names '{}', not a file in {}", name, it.key(), shard, dir.string()));
    }
    shards.insert(shard);
  }
  for (const std::string& shard : shards) {
    TEMPER_ASSIGN_OR_RETURN(SafetensorsFile file, SafetensorsFile::Open(dir / shard));
    ckpt->files_.push_back(std::make_unique<SafetensorsFile>(std::move(file)));
    TEMPER_RETURN_IF_ERROR(ckpt->Add(*ckpt->files_.back()));
  }
  for (auto it = map.begin(); it != map.end(); ++it) {
    const Entry* e = ckpt->Find(it.key());
    const std::string shard = it->get<std::string>();
    if (!e)
      return Status::DataLoss(fmt::format("{}: tensor '{}' is listed for {} but is not in it", name, it.key(), shard));
    if (e->file->path().filename() != shard) {
      return Status::DataLoss(fmt::format("{}: tensor '{}' is listed for {} but is in {}", name, it.key(), shard,
                                          e->file->path().filename().string()));
    }
  }
  for (const auto& [tensor, e] : ckpt->tensors_) {
    if (!map.contains(tensor)) {
      return Status::DataLoss(fmt::format("{}: tensor '{}' in {} is missing from weight_map", name, tensor,
                                          e.file->path().filename().string()));
    }
  }
  return ckpt;
}

Result<std::unique_ptr<Checkpoint>> Checkpoint::FromFile(SafetensorsFile file) {
  std::unique_ptr<Checkpoint> ckpt(new Checkpoint());
  ckpt->dir_ = file.path();
  ckpt->files_.push_back(std::make_unique<SafetensorsFile>(std::move(file)));
  TEMPER_RETURN_IF_ERROR(ckpt->Add(*ckpt->files_.back()));
  return ckpt;
}

const Checkpoint::Entry* Checkpoint::Find(std::string_view name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

Result<const uint16_t*> Checkpoint::Bf16Tensor(std::string_view name, std::span<const int64_t> shape,
                                               std::string_view config_dtype) const {
  const Entry* entry = Find(name);
  if (!entry) return Status::DataLoss(fmt::format("{}: missing tensor '{}'", dir_.string(), name));
  const std::string where = fmt::format("{}: tensor '{}'", entry->file->path().string(), name);
  if (entry->info->dtype != DType::kBF16) {
    return Status::DataLoss(fmt::format("{} has dtype {} but config.json says {} (BF16)", where,
                                        DTypeName(entry->info->dtype), config_dtype));
  }
  if (!std::equal(entry->info->shape.begin(), entry->info->shape.end(), shape.begin(), shape.end())) {
    return Status::DataLoss(fmt::format("{} has shape [{}] but config.json implies [{}]", where,
                                        fmt::join(entry->info->shape, ", "), fmt::join(shape, ", ")));
  }
  if (reinterpret_cast<uintptr_t>(entry->data.data()) % alignof(uint16_t) != 0) {
    return Status::DataLoss(fmt::format("{} starts at an odd byte offset", where));
  }
  return reinterpret_cast<const uint16_t*>(entry->data.data());
}

}  // namespace temper::engine
