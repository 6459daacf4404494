// temper target create | temper baseline: local commands on rootfs targets (they need root, not
// temperd): build a target's Debian 12 root, and run the SCAP Security Guide remediation baseline.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <memory>

#include <fmt/format.h>

#include "orchestrator/cli/commands.h"
#include "stig/baseline.h"
#include "stig/rootfs/rootfs_target.h"
#include "stig/scap/content.h"
#include "stig/scap/evaluator.h"

namespace temper::cli {

namespace {

// Where `temper target create NAME` puts a target unless --dir says otherwise; temperd.yaml's
// rootfs targets point at such a directory.
constexpr const char* kTargetsDir = "/var/lib/temper/targets";
// temperd's default package cache (<state_dir>/packages), so the baseline and the loop share it.
constexpr const char* kPackageCacheDir = "/var/lib/temper/packages";

void Print(const std::string& text) { std::fwrite(text.data(), 1, text.size(), stdout); }

Status CheckName(const std::string& name) {
  if (name.empty() || name.size() > 64 ||
      name.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.") !=
          std::string::npos ||
      name[0] == '.') {
    return Status::InvalidArgument(
        fmt::format("target name '{}': use 1-64 letters, digits, '-', '_' or '.', not starting with '.'", name));
  }
  return Status::OK();
}

}  // namespace

void AddTargetCommand(CLI::App& app, CommandContext& ctx) {
  struct Options {
    std::string name, dir, suite, mirror;
  };
  auto opt = std::make_shared<Options>();
  CLI::App* target = app.add_subcommand("target", "manage local rootfs targets (needs root)");
  target->require_subcommand(1);
  CLI::App* create = target->add_subcommand(
      "create", "build a Debian 12 root presented as Ubuntu 20.04 for the Ubuntu 20.04 STIG (mmdebstrap, network)");
  create->add_option("name", opt->name, "target name")->required();
  create->add_option("--dir", opt->dir, fmt::format("target directory (default {}/NAME)", kTargetsDir));
  create->add_option("--suite", opt->suite, "Debian suite (default bookworm)");
  create->add_option("--mirror", opt->mirror, "Debian mirror URL (default http://deb.debian.org/debian)");
  create->callback([&ctx, opt] {
    ctx.run = [opt]() -> Status {
      TEMPER_RETURN_IF_ERROR(CheckName(opt->name));
      std::string dir = opt->dir.empty() ? fmt::format("{}/{}", kTargetsDir, opt->name) : opt->dir;
      stig::RootfsSpec spec;
      if (!opt->suite.empty()) spec.suite = opt->suite;
      if (!opt->mirror.empty()) spec.mirror = opt->mirror;
      Logger log(LogLevel::kInfo);
      TEMPER_ASSIGN_OR_RETURN(auto t, stig::RootfsTarget::CreateInDir(opt->name, dir, spec, log));
      auto shell = t->Run("/usr/sbin/sshd -t && /usr/sbin/visudo -cq && cat /etc/lsb-release | grep -c focal",
                          temper::SandboxLimits{});
      if (!shell.ok()) return shell.status().WithContext("checking the new target");
      if (!shell->Succeeded()) {
        return Status::Internal(
            fmt::format("target {} was built but fails its checks ({}): {}", opt->name, shell->Describe(), shell->err));
      }
      Print(
          fmt::format("target {} ready in {} (root {}, snapshot layers in {}/state)\n"
                      "add it to temperd.yaml:\n  targets:\n    {}:\n      type: rootfs\n      path: {}\n",
                      opt->name, dir, dir + "/root", dir, opt->name, dir));
      return Status::OK();
    };
  });
}

void AddBaselineCommand(CLI::App& app, CommandContext& ctx) {
  struct Options {
    std::string target, dir, datastream = std::string(stig::kUbuntu2004Datastream), profile = "stig";
    std::string content_dir = std::string(stig::kDefaultContentDir), out;
    std::vector<std::string> rules;
    std::string package_cache = kPackageCacheDir;
    std::vector<std::string> package_sources;
    bool json = false, keep = false, no_package_cache = false;
  };
  auto opt = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "baseline", "run SCAP Security Guide's bash remediation on a rootfs target and report the fix rate (needs root)");
  cmd->add_option("target", opt->target, "target name (made by `temper target create`)")->required();
  cmd->add_option("--dir", opt->dir, fmt::format("target directory (default {}/TARGET)", kTargetsDir));
  cmd->add_option("-d,--datastream", opt->datastream, "SCAP datastream file name or path")->capture_default_str();
  cmd->add_option("-p,--profile", opt->profile, "profile id or name")->capture_default_str();
  cmd->add_option("--content-dir", opt->content_dir, "where datastream names are looked up")->capture_default_str();
  cmd->add_option("-r,--rule", opt->rules, "only these rules (id or name); repeat for several. Default: the profile");
  cmd->add_option("-o,--out", opt->out,
                  "directory for results.xml/arf.xml before and after, fix.sh, fix.log (default: a new temp dir)");
  cmd->add_flag("--keep", opt->keep, "keep the remediated state (default: revert the target afterwards)");
  cmd->add_option("--package-cache", opt->package_cache,
                  "where the packages the fixes install are fetched to (temperd's default cache)")
      ->capture_default_str();
  cmd->add_option("--package-source", opt->package_sources,
                  "apt source line for the package cache; repeat for several (default: Debian 12's archive)");
  cmd->add_flag("--no-package-cache", opt->no_package_cache,
                "install only what the target's own apt cache holds (no network, no host-side cache)");
  cmd->add_flag("--json", opt->json, "print the report as JSON");
  cmd->callback([&ctx, opt] {
    ctx.run = [opt]() -> Status {
      TEMPER_RETURN_IF_ERROR(CheckName(opt->target));
      std::string dir = opt->dir.empty() ? fmt::format("{}/{}", kTargetsDir, opt->target) : opt->dir;
      if (!std::filesystem::is_directory(dir + "/root")) {
        return Status::NotFound(
            fmt::format("no rootfs target at {} (run `temper target create {}` first)", dir, opt->target));
      }
      Logger log(LogLevel::kInfo);
      TEMPER_ASSIGN_OR_RETURN(stig::Content content,
                              stig::Content::Load(opt->datastream, opt->profile, opt->content_dir));
      stig::Evaluator evaluator(content, {}, log);
      stig::PackageCacheOptions packages;
      if (!opt->no_package_cache) {
        packages.dir = std::filesystem::absolute(opt->package_cache).lexically_normal().string();
        if (!opt->package_sources.empty()) packages.sources = opt->package_sources;
      }
      TEMPER_ASSIGN_OR_RETURN(auto target,
                              stig::RootfsTarget::Open(opt->target, dir + "/state", dir + "/root", packages));
      std::string out = opt->out;
      if (out.empty()) {
        std::string tmpl = (std::filesystem::temp_directory_path() / "temper-baseline-XXXXXX").string();
        if (!::mkdtemp(tmpl.data())) return Status::FromErrno(errno, "creating a directory for the results");
        out = tmpl;
      }
      TEMPER_ASSIGN_OR_RETURN(stig::SnapshotId before, target->Snapshot());
      stig::BaselineOptions options;
      options.rule_ids = opt->rules;
      options.output_dir = out;
      Result<stig::BaselineReport> report = stig::RunBaseline(*target, evaluator, options, log);
      if (!opt->keep) {
        Status reverted = target->Revert(before);
        if (!reverted.ok()) log.Error("reverting target {}: {}", opt->target, reverted.ToString());
      }
      if (!report.ok()) return report.status();
      Print(opt->json ? report->ToJson() + "\n" : report->ToText() + fmt::format("results in {}\n", out));
      return Status::OK();
    };
  });
}

}  // namespace temper::cli
