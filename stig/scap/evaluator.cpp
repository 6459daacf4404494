#include "stig/scap/evaluator.h"

#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "platform/process.h"
#include "platform/unique_fd.h"
#include "stig/scap/eval_sandbox.h"

namespace temper::stig {

namespace fs = std::filesystem;

namespace {
constexpr std::chrono::milliseconds kServerStartTimeout = std::chrono::minutes(2);
}

std::string DefaultEvalHelperPath() {
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    // Beside the executable in a build tree; <prefix>/libexec/temper when installed (temperd is in
    // <prefix>/sbin, temper in <prefix>/bin).
    for (const fs::path& candidate : {self.parent_path() / "temper-stig-eval",
                                      self.parent_path().parent_path() / "libexec/temper/temper-stig-eval"}) {
      if (fs::exists(candidate, ec)) return candidate.string();
    }
  }
  return TEMPER_STIG_EVAL_BUILD_PATH;
}

Result<Verdict> Evaluation::VerdictOf(const std::string& rule_id) const {
  for (const auto& v : verdicts) {
    if (v.rule_id == rule_id) return v.verdict;
  }
  return Status::NotFound("rule " + rule_id + " was not evaluated");
}

std::map<Verdict, int> Evaluation::Counts() const {
  std::map<Verdict, int> counts;
  for (const auto& v : verdicts) counts[v.verdict]++;
  return counts;
}

Evaluator::Evaluator(const Content& content, EvaluatorOptions options, const Logger& log)
    : content_(content), options_(std::move(options)), log_(log) {
  if (options_.helper_path.empty()) options_.helper_path = DefaultEvalHelperPath();
  // The sandbox starts the helper from "/", and binds it at the path it has here.
  std::error_code ec;
  fs::path absolute = fs::absolute(options_.helper_path, ec);
  if (!ec) options_.helper_path = absolute.string();
}

Result<std::vector<std::string>> Evaluator::ResolveRules(const std::vector<std::string>& rule_ids) const {
  std::vector<std::string> rules;
  for (const auto& id : rule_ids) {
    TEMPER_ASSIGN_OR_RETURN(std::string full, content_.ResolveRuleId(id));
    rules.push_back(std::move(full));
  }
  return rules;
}

Evaluator::~Evaluator() = default;

std::vector<pid_t> Evaluator::IdleServerPids() const {
  std::lock_guard lock(pool_mu_);
  std::vector<pid_t> pids;
  for (const auto& s : idle_) pids.push_back(s->pid());
  return pids;
}

Status Evaluator::CheckHelper() const {
  if (::access(options_.helper_path.c_str(), X_OK) != 0) {
    return Status::Unavailable("the evaluation helper " + options_.helper_path + " is missing or not executable");
  }
  if (::geteuid() != 0) {
    return Status::FailedPrecondition("the evaluator's sandbox needs root on the host to map the id range");
  }
  return Status::OK();
}

ProcessSpec Evaluator::HelperSpec(const std::vector<std::string>& args, EvalSandboxPaths paths) const {
  paths.helper = options_.helper_path;
  ProcessSpec spec;
  // TZ as a POSIX rule, so no zone file is read (the target's /etc/localtime would be): UTC times.
  spec.argv = EvalSandboxArgv(
      paths, {{"PATH", "/usr/sbin:/usr/bin:/sbin:/bin"}, {"HOME", "/tmp"}, {"LC_ALL", "C"}, {"TZ", "UTC0"}}, args);
  spec.new_user_namespace = true;
  spec.timeout = options_.timeout;
  spec.memory_limit_bytes = options_.memory_limit_bytes;
  spec.max_output_bytes = 64 << 20;
  return spec;
}

Result<std::vector<RuleVerdict>> Evaluator::CheckVerdicts(const std::string& out, const std::string& err,
                                                          const std::vector<std::string>& rules,
                                                          const std::string& where) const {
  std::map<std::string, Verdict> got;
  std::istringstream lines(out);
  std::string line;
  int line_no = 0;
  while (std::getline(lines, line)) {
    ++line_no;
    if (line.empty()) continue;
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.contains("rule") || !j.contains("result") || !j["rule"].is_string() ||
        !j["result"].is_string()) {
      return Status::Internal(fmt::format("evaluation helper output line {} is malformed: {}", line_no, line));
    }
    TEMPER_ASSIGN_OR_RETURN(Verdict v, ParseVerdict(j["result"].get<std::string>()));
    got[j["rule"].get<std::string>()] = v;
  }
  std::vector<RuleVerdict> verdicts;
  const std::vector<std::string>& wanted = rules.empty() ? content_.profile_rule_ids() : rules;
  for (const auto& r : wanted) {
    auto it = got.find(r);
    if (it == got.end()) {
      return Status::Internal(fmt::format("OpenSCAP returned no verdict for {} on {}: {}", r, where, err));
    }
    verdicts.push_back({r, it->second});
  }
  return verdicts;
}

Result<std::vector<RuleVerdict>> Evaluator::RunHelper(std::vector<std::string> args, EvalSandboxPaths paths,
                                                      const std::vector<std::string>& rules, const std::string& where,
                                                      double* seconds) const {
  TEMPER_RETURN_IF_ERROR(CheckHelper());
  for (const auto& r : rules) {
    args.push_back("--rule");
    args.push_back(r);
  }
  TEMPER_ASSIGN_OR_RETURN(ProcessResult pr, RunProcess(HelperSpec(args, std::move(paths))));
  if (seconds) *seconds = pr.seconds;
  if (pr.timed_out) {
    return Status::DeadlineExceeded(fmt::format("evaluating on {} {}", where, pr.Describe()));
  }
  if (!pr.Succeeded()) {
    return Status::Internal(fmt::format("OpenSCAP evaluation on {} failed ({}): {}", where, pr.Describe(), pr.err));
  }
  return CheckVerdicts(pr.out, pr.err, rules, where);
}

Result<std::unique_ptr<EvalServer>> Evaluator::TakeServer(bool& reused) const {
  {
    std::lock_guard lock(pool_mu_);
    reused = !idle_.empty();
    if (reused) {
      std::unique_ptr<EvalServer> s = std::move(idle_.back());
      idle_.pop_back();
      return s;
    }
  }
  const std::string datastream = fs::absolute(content_.datastream_path()).string();
  // Loading the content takes about 0.5 s whatever is evaluated later: a bound of its own, so that a
  // short evaluation timeout still lets a server start.
  auto server =
      EvalServer::Start(HelperSpec({"--serve", "--datastream", datastream, "--profile", content_.profile().id},
                                   EvalSandboxPaths{.read_only = {datastream}}),
                        options_.timeout);
  if (!server.ok()) {
    if (!servers_unavailable_.exchange(true)) {
      log_.Warning("evaluations fall back to a fresh helper each: {}", server.status().ToString());
    }
    return Status::Unavailable(server.status().message());
  }
  return server;
}

Result<std::vector<RuleVerdict>> Evaluator::ServeEvaluation(const std::string& root,
                                                            const std::vector<std::string>& rules,
                                                            const std::string& output_dir,
                                                            const EvaluationRequest& evaluation,
                                                            const std::string& where, double* seconds) const {
  UniqueFd tree(::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (tree.get() < 0) return Status::FromErrno(errno, "opening the evaluation root " + root);
  UniqueFd out;
  if (!output_dir.empty()) {
    out = UniqueFd(::open(output_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (out.get() < 0) return Status::FromErrno(errno, "opening the output directory " + output_dir);
  }
  EvalServer::Request request{.root = root,
                              .rules = rules,
                              .tree_fd = tree.get(),
                              .out_dir_fd = out.get(),
                              .fix = evaluation.write_fix_script,
                              .target_name = evaluation.target_name};
  // A server that died while idle (killed, or with the thread that started it) is seen only when
  // asked: the next idle one is tried, then a fresh one, whose failure is final.
  while (true) {
    bool reused = false;
    TEMPER_ASSIGN_OR_RETURN(std::unique_ptr<EvalServer> server, TakeServer(reused));
    auto reply = server->Evaluate(request, options_.timeout);
    if (!server->broken()) {
      std::lock_guard lock(pool_mu_);
      idle_.push_back(std::move(server));
    }
    if (!reply.ok()) {
      if (reply.status().code() == StatusCode::kDeadlineExceeded) {
        return Status::DeadlineExceeded(fmt::format("evaluating on {} {}", where, reply.status().message()));
      }
      if (reused) {
        log_.Info("an idle evaluation server failed ({}); trying another", reply.status().ToString());
        continue;
      }
      return Status::Internal(fmt::format("OpenSCAP evaluation on {} failed: {}", where, reply.status().message()));
    }
    if (seconds) *seconds = reply->seconds;
    if (!reply->failure.empty()) {
      return Status::Internal(fmt::format("OpenSCAP evaluation on {} failed ({})", where, reply->failure));
    }
    return CheckVerdicts(reply->out, reply->failure, rules, where);
  }
}

Result<Evaluation> Evaluator::Evaluate(const std::string& root_dir, const EvaluationRequest& request) const {
  if (request.write_fix_script && request.output_dir.empty()) {
    return Status::InvalidArgument("evaluation: write_fix_script needs an output_dir");
  }
  TEMPER_ASSIGN_OR_RETURN(std::vector<std::string> rules, ResolveRules(request.rule_ids));
  std::error_code ec;
  if (!fs::is_directory(root_dir, ec)) return Status::NotFound("evaluation root " + root_dir + " is not a directory");

  const std::string root = fs::absolute(root_dir, ec).string();
  const std::string datastream = fs::absolute(content_.datastream_path(), ec).string();
  std::vector<std::string> args = {"--datastream", datastream, "--profile", content_.profile().id, "--root", root};
  EvalSandboxPaths paths{.read_only = {datastream}, .target = root};
  Evaluation out;
  if (!request.output_dir.empty()) {
    const fs::path dir = fs::absolute(request.output_dir, ec);
    fs::create_directories(dir, ec);
    if (ec) return Status::IOError("creating " + request.output_dir + ": " + ec.message());
    paths.writable.push_back(dir.string());
    out.results_path = (dir / "results.xml").string();
    out.arf_path = (dir / "arf.xml").string();
    args.insert(args.end(), {"--results", out.results_path, "--arf", out.arf_path});
    if (!request.target_name.empty()) args.insert(args.end(), {"--target-name", request.target_name});
    if (request.write_fix_script) {
      out.fix_script_path = (dir / "fix.sh").string();
      args.insert(args.end(), {"--fix", out.fix_script_path});
    }
  }
  log_.Debug("evaluating {} rule(s) of {} on {}", rules.empty() ? content_.profile_rule_ids().size() : rules.size(),
             content_.profile().id, root_dir);
  if (options_.use_servers && !servers_unavailable_) {
    TEMPER_RETURN_IF_ERROR(CheckHelper());
    auto served =
        ServeEvaluation(root, rules, out.results_path.empty() ? "" : fs::path(out.results_path).parent_path().string(),
                        request, root_dir, &out.seconds);
    if (served.status().code() != StatusCode::kUnavailable) {
      TEMPER_ASSIGN_OR_RETURN(out.verdicts, std::move(served));
      return out;
    }
  }
  TEMPER_ASSIGN_OR_RETURN(out.verdicts, RunHelper(std::move(args), std::move(paths), rules, root_dir, &out.seconds));
  return out;
}

Result<std::vector<RuleVerdict>> Evaluator::ReadResults(const std::string& results_path,
                                                        const std::vector<std::string>& rule_ids) const {
  TEMPER_ASSIGN_OR_RETURN(std::vector<std::string> rules, ResolveRules(rule_ids));
  std::error_code ec;
  const std::string file = std::filesystem::absolute(results_path, ec).string();
  return RunHelper({"--read-results", file, "--profile", content_.profile().id}, EvalSandboxPaths{.read_only = {file}},
                   rules, results_path, nullptr);
}

}  // namespace temper::stig
