#include "stig/scap/evaluator.h"

#include <unistd.h>

#include <filesystem>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "stig/process.h"
#include "stig/scap/eval_sandbox.h"

namespace temper::stig {

namespace fs = std::filesystem;

std::string DefaultEvalHelperPath() {
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    fs::path beside = self.parent_path() / "temper-stig-eval";
    if (fs::exists(beside, ec)) return beside.string();
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

Result<std::vector<RuleVerdict>> Evaluator::RunHelper(std::vector<std::string> args, EvalSandboxPaths paths,
                                                      const std::vector<std::string>& rules, const std::string& where,
                                                      double* seconds) const {
  if (::access(options_.helper_path.c_str(), X_OK) != 0) {
    return Status::Unavailable("the evaluation helper " + options_.helper_path + " is missing or not executable");
  }
  if (::geteuid() != 0) {
    return Status::FailedPrecondition("the evaluator's sandbox needs root on the host to map the id range");
  }
  for (const auto& r : rules) {
    args.push_back("--rule");
    args.push_back(r);
  }
  paths.helper = options_.helper_path;
  ProcessSpec spec;
  // TZ as a POSIX rule, so no zone file is read (the target's /etc/localtime would be): UTC times.
  spec.argv = EvalSandboxArgv(
      paths, {{"PATH", "/usr/sbin:/usr/bin:/sbin:/bin"}, {"HOME", "/tmp"}, {"LC_ALL", "C"}, {"TZ", "UTC0"}}, args);
  spec.new_user_namespace = true;
  spec.timeout = options_.timeout;
  spec.memory_limit_bytes = options_.memory_limit_bytes;
  spec.max_output_bytes = 64 << 20;

  TEMPER_ASSIGN_OR_RETURN(ProcessResult pr, RunProcess(spec));
  if (seconds) *seconds = pr.seconds;
  if (pr.timed_out) {
    return Status::DeadlineExceeded(fmt::format("evaluating on {} {}", where, pr.Describe()));
  }
  if (!pr.Succeeded()) {
    return Status::Internal(fmt::format("OpenSCAP evaluation on {} failed ({}): {}", where, pr.Describe(), pr.err));
  }

  std::map<std::string, Verdict> got;
  std::istringstream lines(pr.out);
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
  std::vector<RuleVerdict> out;
  const std::vector<std::string>& wanted = rules.empty() ? content_.profile_rule_ids() : rules;
  for (const auto& r : wanted) {
    auto it = got.find(r);
    if (it == got.end()) {
      return Status::Internal(fmt::format("OpenSCAP returned no verdict for {} on {}: {}", r, where, pr.err));
    }
    out.push_back({r, it->second});
  }
  return out;
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
    if (request.write_fix_script) {
      out.fix_script_path = (dir / "fix.sh").string();
      args.insert(args.end(), {"--fix", out.fix_script_path});
    }
  }
  log_.Debug("evaluating {} rule(s) of {} on {}", rules.empty() ? content_.profile_rule_ids().size() : rules.size(),
             content_.profile().id, root_dir);
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
