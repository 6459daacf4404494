// YamlNode: strict, located reading of temper's YAML config files.
//
// Every error names the file, the 1-based line and column, and the dotted path of the field:
//   /etc/temper/temperd.yaml:7:12: listen.unix.path: expected a string, got a sequence
// Unknown keys and duplicate keys are errors (a typo must never be silently ignored), and the error
// for an unknown key suggests the closest known one.
//
// Thread safety: a YamlNode is a value; distinct nodes may be read from distinct threads.
#pragma once

#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "common/status.h"

namespace temper {

class YamlNode {
 public:
  // Parses a whole file. A missing file is NotFound; a syntax error is InvalidArgument with its line.
  static Result<YamlNode> LoadFile(const std::string& path);
  // Parses text; `source_name` stands for the file name in errors.
  static Result<YamlNode> LoadString(const std::string& text, const std::string& source_name);

  const std::string& file() const { return file_; }  // the source file name
  const std::string& path() const { return path_; }  // dotted field path, "" for the document
  bool IsNull() const { return !node_.IsDefined() || node_.IsNull(); }

  // An InvalidArgument "file:line:col: path: message" located at this node.
  Status Error(std::string_view message) const;
  // "file:line:col" of this node (the file alone when the node has no position).
  std::string Location() const;

  // --- mappings ---
  // Fails unless this node is a mapping whose keys are all in `allowed` and none repeats.
  Status ExpectMapWithKeys(std::initializer_list<std::string_view> allowed) const;
  // Fails unless this node is a mapping; any key is allowed (for user-named entries such as targets).
  Status ExpectMap() const;
  // The value of `key`, or nullopt when absent or null.
  std::optional<YamlNode> Find(std::string_view key) const;
  // Like Find, but a missing key is an error located at this mapping.
  Result<YamlNode> Require(std::string_view key) const;
  // The entries of a mapping in file order (precondition: ExpectMap succeeded).
  std::vector<std::pair<std::string, YamlNode>> Entries() const;

  // --- sequences ---
  Result<std::vector<YamlNode>> Items() const;

  // --- scalars ---
  Result<std::string> AsString() const;  // a non-empty string
  // A file system path; a relative one is taken relative to the directory of the file it is in, so a
  // config and the files it names can move together.
  Result<std::string> AsPath() const;
  Result<bool> AsBool() const;
  Result<int64_t> AsInt(int64_t min, int64_t max) const;
  Result<double> AsDouble(double min, double max) const;
  // "90s", "20m", "1h30m", "2d", or a bare number of seconds; within [min, max].
  Result<std::chrono::seconds> AsDuration(std::chrono::seconds min, std::chrono::seconds max) const;

 private:
  YamlNode(YAML::Node node, std::string file, std::string path)
      : node_(std::move(node)), file_(std::move(file)), path_(std::move(path)) {}
  YamlNode Child(const YAML::Node& node, std::string_view key) const;
  std::string_view KindName() const;

  YAML::Node node_;
  std::string file_;
  std::string path_;
};

// Parses a duration such as "1h30m" (units d, h, m, s); a bare integer means seconds.
Result<std::chrono::seconds> ParseDuration(std::string_view text);

}  // namespace temper
