// temper-stig-eval: the child process that runs one OpenSCAP evaluation of a directory tree.
//
// libopenscap keeps its probe root (OSCAP_PROBE_ROOT) process-wide and its chroot-mode probes
// chroot(2) the whole process, so an evaluation cannot share a process with anything else: the
// Evaluator starts this program once per batch of rules and reads its verdicts from stdout.
//
//   temper-stig-eval --datastream DS --profile ID --root DIR --workdir DIR
//                    [--rule ID]... [--results FILE] [--arf FILE] [--fix FILE]
//   temper-stig-eval --read-results FILE --profile ID --workdir DIR [--rule ID]...
//
// The second form reads the verdicts of an evaluation made elsewhere (OpenSCAP on an SSH host
// writes results.xml there; it is copied back) from its XCCDF TestResult, so remote verdicts come
// from libopenscap's own parser and are printed and checked exactly like local ones.
//
// Output: one JSON object per line, {"rule": ID, "result": TOKEN} for each evaluated rule, where
// TOKEN is libopenscap's own xccdf_test_result_type_get_text. Exit 0 when the evaluation ran
// (whatever the verdicts), 1 with a message on stderr when it could not run, 2 for bad arguments.
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "stig/oscap_api.h"

namespace {

std::string OscapError() {
  if (!oscap_err()) return "(libopenscap gave no detail)";
  char* e = oscap_err_get_full_error();
  std::string s = e ? e : "";
  std::free(e);
  return s;
}

int Fail(const std::string& what) {
  std::fprintf(stderr, "temper-stig-eval: %s\n", what.c_str());
  return 1;
}

struct Args {
  std::string datastream, profile, root, workdir, results, arf, fix, read_results;
  std::vector<std::string> rules;
};

bool Parse(int argc, char** argv, Args& a) {
  for (int i = 1; i < argc; ++i) {
    std::string k = argv[i];
    if (i + 1 >= argc) return false;
    std::string v = argv[++i];
    if (k == "--datastream") a.datastream = v;
    else if (k == "--profile") a.profile = v;
    else if (k == "--root") a.root = v;
    else if (k == "--workdir") a.workdir = v;
    else if (k == "--rule") a.rules.push_back(v);
    else if (k == "--results") a.results = v;
    else if (k == "--arf") a.arf = v;
    else if (k == "--fix") a.fix = v;
    else if (k == "--read-results") a.read_results = v;
    else return false;
  }
  if (!a.read_results.empty()) return !a.profile.empty() && !a.workdir.empty() && a.datastream.empty() && a.root.empty();
  return !a.datastream.empty() && !a.profile.empty() && !a.root.empty() && !a.workdir.empty();
}

// libapt-pkg, which the dpkginfo probe uses with RootDir set to the probe root, still reads the
// host's /etc/apt/apt.conf.d (OpenSCAP 1.3.7; fixed in 1.3.10). Host settings there can make
// dpkginfo fail outright, which flips package rules. Point apt at an empty parts directory.
bool WriteAptConfig(const std::string& workdir, std::string& path) {
  path = workdir + "/apt.conf";
  FILE* f = std::fopen(path.c_str(), "w");
  if (!f) return false;
  std::fputs("Dir::Etc::Parts \"/nonexistent\";\n", f);
  return std::fclose(f) == 0;
}

// One JSON line per rule the result covers (only those in `only`, when given), in the result's order.
void PrintVerdicts(struct xccdf_result* result, const std::set<std::string>& only = {}) {
  struct xccdf_rule_result_iterator* it = xccdf_result_get_rule_results(result);
  while (xccdf_rule_result_iterator_has_more(it)) {
    struct xccdf_rule_result* rr = xccdf_rule_result_iterator_next(it);
    xccdf_test_result_type_t verdict = xccdf_rule_result_get_result(rr);
    if (verdict == XCCDF_RESULT_NOT_SELECTED) continue;
    if (!only.empty() && !only.count(xccdf_rule_result_get_idref(rr))) continue;
    nlohmann::json line = {{"rule", xccdf_rule_result_get_idref(rr)},
                           {"result", xccdf_test_result_type_get_text(verdict)}};
    std::printf("%s\n", line.dump().c_str());
  }
  xccdf_rule_result_iterator_free(it);
}

// The last TestResult of a results file (`oscap xccdf eval --results` writes the benchmark with
// the evaluation's TestResult appended).
int ReadResults(const Args& a) {
  oscap_init();
  struct oscap_source* source = oscap_source_new_from_file(a.read_results.c_str());
  struct xccdf_benchmark* benchmark = source ? xccdf_benchmark_import_source(source) : nullptr;
  if (!benchmark) {
    if (source) oscap_source_free(source);
    return Fail("cannot read " + a.read_results + " as XCCDF results: " + OscapError());
  }
  struct xccdf_result* last = nullptr;
  struct xccdf_result_iterator* results = xccdf_benchmark_get_results(benchmark);
  while (xccdf_result_iterator_has_more(results)) last = xccdf_result_iterator_next(results);
  xccdf_result_iterator_free(results);
  int rc = 0;
  if (!last) {
    rc = Fail(a.read_results + " holds no TestResult");
  } else {
    const char* profile = xccdf_result_get_profile(last);
    if (!profile || a.profile != profile) {
      rc = Fail(a.read_results + ": its TestResult is for profile " + (profile ? profile : "(none)") + ", not " +
                a.profile);
    } else {
      PrintVerdicts(last, std::set<std::string>(a.rules.begin(), a.rules.end()));
    }
  }
  std::fflush(stdout);
  xccdf_benchmark_free(benchmark);
  oscap_source_free(source);
  oscap_cleanup();
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  if (!Parse(argc, argv, a)) {
    std::fprintf(stderr,
                 "usage: temper-stig-eval --datastream DS --profile ID --root DIR --workdir DIR "
                 "[--rule ID]... [--results FILE] [--arf FILE] [--fix FILE]\n"
                 "       temper-stig-eval --read-results FILE --profile ID --workdir DIR [--rule ID]...\n");
    return 2;
  }
  if (!a.read_results.empty()) return ReadResults(a);
  std::string apt_config;
  if (!WriteAptConfig(a.workdir, apt_config)) return Fail("cannot write " + a.workdir + "/apt.conf");
  setenv("APT_CONFIG", apt_config.c_str(), 1);
  setenv("OSCAP_PROBE_ROOT", a.root.c_str(), 1);
  setenv("OSCAP_EVALUATION_TARGET", ("chroot://" + a.root).c_str(), 1);

  oscap_init();
  struct xccdf_session* s = xccdf_session_new(a.datastream.c_str());
  if (!s) return Fail("cannot open " + a.datastream + ": " + OscapError());
  xccdf_session_set_validation(s, false, false);
  for (const auto& r : a.rules) xccdf_session_add_rule(s, r.c_str());
  if (!a.results.empty()) xccdf_session_set_xccdf_export(s, a.results.c_str());
  if (!a.arf.empty()) xccdf_session_set_arf_export(s, a.arf.c_str());
  if (xccdf_session_load(s) != 0) return Fail("cannot load " + a.datastream + ": " + OscapError());
  if (!xccdf_session_set_profile_id(s, a.profile.c_str())) {
    return Fail("no profile " + a.profile + " in " + a.datastream);
  }
  if (xccdf_session_evaluate(s) != 0) return Fail("evaluation failed: " + OscapError());

  struct xccdf_policy* policy = xccdf_session_get_xccdf_policy(s);
  struct xccdf_result* result = xccdf_policy_get_result_by_id(policy, xccdf_session_get_result_id(s));
  if (!result) return Fail("evaluation produced no TestResult: " + OscapError());
  PrintVerdicts(result);

  if (!a.results.empty() || !a.arf.empty()) {
    if (xccdf_session_export_oval(s) != 0 || xccdf_session_export_xccdf(s) != 0 ||
        xccdf_session_export_arf(s) != 0) {
      return Fail("writing results failed: " + OscapError());
    }
  }
  if (!a.fix.empty()) {
    int fd = ::open(a.fix.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return Fail("cannot create " + a.fix);
    int rc = xccdf_policy_generate_fix(policy, result, "urn:xccdf:fix:script:sh", fd);
    ::close(fd);
    if (rc != 0) return Fail("generating the fix script failed: " + OscapError());
  }
  std::fflush(stdout);
  xccdf_session_free(s);
  oscap_cleanup();
  return 0;
}
