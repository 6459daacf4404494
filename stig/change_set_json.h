// The JSON pieces a change set (change_set.h) and a fix bundle (fix_bundle.h) share: one path's
// state, and readers of a parsed document that name the field they failed on.
//
// Both formats describe a path's type, mode, owner, group, size and link the same way, so both
// read and write it here, and a bundle refuses exactly what a change set refuses.
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "stig/change_set.h"

namespace temper::stig::json_fields {

// {"type","mode","uid","gid","size"} plus "link" for a symlink; null for nullopt.
nlohmann::json StateJson(const std::optional<FileState>& state);

// Each reader looks up `field` in the object `obj`, which is at `where` ("files[2]"), and names
// "where.field" in its InvalidArgument.
// A string; empty when absent.
Result<std::string> String(const nlohmann::json& obj, const std::string& field, const std::string& where);
// A non-negative integer; absent is an error.
Result<std::uint64_t> Number(const nlohmann::json& obj, const std::string& field, const std::string& where);
// An array of strings; empty when absent.
Result<std::vector<std::string>> Strings(const nlohmann::json& obj, const std::string& field, const std::string& where);
// A path state as StateJson writes it; nullopt when absent or null.
Result<std::optional<FileState>> State(const nlohmann::json& obj, const std::string& field, const std::string& where);
// The object `name` of the document `doc` (an empty object when absent), for "packages" and "services".
Result<const nlohmann::json*> Group(const nlohmann::json& doc, const char* name);
// The "packages" and "services" groups as ChangeSet::ToJson writes them.
nlohmann::json PackagesJson(const PackageChanges& packages);
nlohmann::json ServicesJson(const ServiceChanges& services);
Result<PackageChanges> Packages(const nlohmann::json& doc);
Result<ServiceChanges> Services(const nlohmann::json& doc);

}  // namespace temper::stig::json_fields
