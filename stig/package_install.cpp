#include "stig/package_install.h"

#include <algorithm>
#include <cctype>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "stig/packages/apt_output.h"
#include "stig/shell_quote.h"

namespace temper::stig {
namespace {

// Non-interactive, keeping the target's edited configuration files over the packages' new ones
// (what an operator's unattended upgrade does), without a pseudo-terminal for dpkg.
constexpr const char* kAptOptions =
    "-y -q -o Dpkg::Use-Pty=0 -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold";

std::string Join(const std::vector<std::string>& v, std::string_view sep) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : std::string(sep)) + x;
  return s;
}

Status CheckNames(const std::vector<std::string>& packages) {
  if (packages.empty()) return Status::InvalidArgument("no package names given");
  for (const std::string& name : packages) {
    if (!IsPackageName(name)) {
      return Status::InvalidArgument(fmt::format(
          "\"{}\" is not a Debian package name (lower-case letters, digits, '+', '-', '.'; no options or patterns)",
          name));
    }
  }
  return Status::OK();
}

// apt's and dpkg's output less the boilerplate and progress lines.
std::string CleanOutput(const ProcessResult& r) {
  std::string out;
  for (const std::string& line : OutputLines(r.out + "\n" + r.err)) {
    if (line.empty() || line.starts_with("(Reading database") || line == "Reading package lists..." ||
        line == "Building dependency tree..." || line == "Reading state information...") {
      continue;
    }
    out += line + "\n";
  }
  return out;
}

// The last ~4 KB, where apt and dpkg say what went wrong (aide-common alone prints ~40 KB).
std::string Tail(std::string text) { return text.size() > 4000 ? "…" + text.substr(text.size() - 4000) : text; }

std::vector<std::string> ChangedLines(const std::string& output) {
  std::vector<std::string> out;
  for (const std::string& line : OutputLines(output)) {
    if (line.starts_with("Setting up ") || line.starts_with("Removing ") ||
        line.starts_with("Purging configuration files for ")) {
      out.push_back(line.ends_with(" ...") ? line.substr(0, line.size() - 4) : line);
    }
  }
  return out;
}

// Why an apt-get run inside the target failed, as a named error; `full` is its cleaned output.
Status AptFailure(std::string_view what, const std::vector<std::string>& packages, const ProcessResult& r,
                  const std::string& full) {
  const std::string output = Tail(full);
  const std::string names = Join(packages, " ");
  if (!r.cap_hit.empty()) {
    return Status::FailedPrecondition(
        fmt::format("{} {}: {}; the target may be left half-configured:\n{}", what, names, r.Describe(), output));
  }
  if (r.stopped) {
    return Status::Cancelled(fmt::format("{} {} was stopped ({}): the batch was cancelled or temperd is stopping", what,
                                         names, r.Describe()));
  }
  if (r.timed_out) {
    return Status::FailedPrecondition(fmt::format("{} {} timed out ({}); the target may be left half-configured:\n{}",
                                                  what, names, r.Describe(), output));
  }
  std::vector<std::string> unknown;
  std::string scripts;
  for (const std::string& line : OutputLines(full)) {
    if (line.starts_with("E: Unable to locate package ")) unknown.push_back(line.substr(28));
    if (line.starts_with("dpkg: error processing") || Contains(line, "subprocess returned error exit status")) {
      scripts += line + "\n";
    }
  }
  if (!unknown.empty()) {
    return Status::NotFound(fmt::format("{} {} unknown to the target's apt and not installed:\n{}", Join(unknown, ", "),
                                        unknown.size() == 1 ? "is" : "are", output));
  }
  if (!scripts.empty()) {
    return Status::FailedPrecondition(fmt::format(
        "{} {}: a maintainer script failed ({}); the target may be left half-configured:\n{}\n--- apt output ---\n{}",
        what, names, r.Describe(), scripts, output));
  }
  if (Contains(full, "unmet dependencies") || Contains(full, "Unable to correct problems")) {
    return Status::FailedPrecondition(
        fmt::format("{} {}: the dependencies cannot be satisfied on this target:\n{}", what, names, output));
  }
  if (Contains(full, "Essential packages were removed") || Contains(full, "essential packages will be removed")) {
    return Status::FailedPrecondition(fmt::format("{} {} would remove essential packages:\n{}", what, names, output));
  }
  return Status::FailedPrecondition(fmt::format("{} {} failed ({}):\n{}", what, names, r.Describe(), output));
}

// Debian policy §5.6.12: [epoch:]upstream[-revision], of alphanumerics and . + ~ - :.
bool IsDebianVersion(std::string_view v) {
  return !v.empty() && v[0] >= '0' && v[0] <= '9' && std::all_of(v.begin(), v.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '+' || c == '~' || c == '-' || c == ':';
  });
}

// Prepares `names` in the package cache and runs apt-get install of `apt_words` (the names, or
// name=version) with them: InstallPackages's and InstallPackageVersions's common part.
Result<PackageChange> Install(Target& target, const std::vector<std::string>& names,
                              const std::vector<std::string>& apt_words, const SandboxLimits& limits) {
  Result<ResolvedPackages> prepared = target.PreparePackages(names);
  if (!prepared.ok()) {
    // The target is fine; the install just cannot happen now.
    if (prepared.status().code() == StatusCode::kUnavailable) {
      return Status::FailedPrecondition(prepared.status().message());
    }
    return prepared.status();
  }
  const std::string command = fmt::format("apt-get install --no-download {} {}", kAptOptions, Join(apt_words, " "));
  TEMPER_ASSIGN_OR_RETURN(ProcessResult r, target.RunWithPackages(command, limits, *prepared));
  std::string output = CleanOutput(r);
  if (!r.Succeeded()) return AptFailure("installing", names, r, output);
  PackageChange change{ChangedLines(output), Tail(output), r.seconds};
  if (!prepared->notes.empty()) change.output = prepared->notes + "\n" + change.output;
  return change;
}

std::string ShortName(std::string name) {
  std::size_t colon = name.find(':');  // multi-arch qualifier, e.g. libfoo:amd64
  return colon == std::string::npos ? name : name.substr(0, colon);
}

}  // namespace

Result<PackageChange> InstallPackages(Target& target, const std::vector<std::string>& packages,
                                      const SandboxLimits& limits) {
  TEMPER_RETURN_IF_ERROR(CheckNames(packages));
  return Install(target, packages, packages, limits);
}

Result<PackageChange> InstallPackageVersions(Target& target, const std::vector<PackageVersion>& packages,
                                             const SandboxLimits& limits) {
  std::vector<std::string> names, wanted;
  for (const PackageVersion& p : packages) {
    names.push_back(p.name);
    if (!IsDebianVersion(p.version)) {
      return Status::InvalidArgument(fmt::format("\"{}\" is not a Debian version (of {})", p.version, p.name));
    }
    wanted.push_back(ShellQuote(p.name + "=" + p.version));
  }
  TEMPER_RETURN_IF_ERROR(CheckNames(names));
  return Install(target, names, wanted, limits);
}

Result<PackageChange> RemovePackages(Target& target, const std::vector<std::string>& packages, bool purge,
                                     const SandboxLimits& limits) {
  TEMPER_RETURN_IF_ERROR(CheckNames(packages));
  const std::string verb = purge ? "purge" : "remove";
  const std::string what = purge ? "purging" : "removing";
  // A dry run first: apt names every package the removal would take with it.
  TEMPER_ASSIGN_OR_RETURN(ProcessResult sim,
                          target.Run(fmt::format("apt-get {} -s -q {}", verb, Join(packages, " ")), limits));
  std::string sim_output = Tail(CleanOutput(sim));
  if (!sim.Succeeded()) return AptFailure(what, packages, sim, sim_output);
  if (Contains(sim_output, "essential packages will be removed")) {
    return Status::FailedPrecondition(
        fmt::format("{} {} would remove essential packages:\n{}", what, Join(packages, " "), sim_output));
  }
  const std::set<std::string> named(packages.begin(), packages.end());
  std::vector<std::string> going, extra;
  for (const std::string& line : OutputLines(sim.out)) {
    if (!line.starts_with("Remv ") && !line.starts_with("Purg ")) continue;
    std::string name = ShortName(line.substr(5, line.find(' ', 5) - 5));
    going.push_back(name);
    if (!named.count(name)) extra.push_back(name);
  }
  if (!extra.empty()) {
    return Status::FailedPrecondition(
        fmt::format("{} {} would also remove {}, which depend on it; name them too if that is intended", what,
                    Join(packages, " "), Join(extra, " ")));
  }
  if (going.empty()) {
    return PackageChange{{},
                         fmt::format("nothing to {}: {} not installed\n{}", verb, Join(packages, " "), sim_output),
                         sim.seconds};
  }
  TEMPER_ASSIGN_OR_RETURN(ProcessResult r,
                          target.Run(fmt::format("apt-get {} {} {}", verb, kAptOptions, Join(packages, " ")), limits));
  std::string output = CleanOutput(r);
  if (!r.Succeeded()) return AptFailure(what, packages, r, output);
  return PackageChange{ChangedLines(output), Tail(output), sim.seconds + r.seconds};
}

std::vector<std::string> PackagesInstalledBy(std::string_view script) {
  std::vector<std::string> out;
  for (const std::string& line : OutputLines(std::string(script))) {
    for (std::string_view tool : {"apt-get install ", "apt install "}) {
      for (std::size_t at = line.find(tool); at != std::string::npos; at = line.find(tool, at + 1)) {
        // Inside a quoted string (an echo, a message) it is text, not a command.
        if (std::count(line.begin(), line.begin() + static_cast<std::ptrdiff_t>(at), '"') % 2 == 1) continue;
        // The words up to the end of this command.
        std::string rest = line.substr(at + tool.size());
        rest = rest.substr(0, rest.find_first_of(";&|)<>#`"));
        std::istringstream words(rest);
        for (std::string w; words >> w;) {
          w.erase(std::remove_if(w.begin(), w.end(), [](char c) { return c == '"' || c == '\''; }), w.end());
          if (w.starts_with("-") || !IsPackageName(w)) continue;
          if (std::find(out.begin(), out.end(), w) == out.end()) out.push_back(w);
        }
      }
    }
  }
  return out;
}

}  // namespace temper::stig
