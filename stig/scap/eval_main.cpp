// temper-stig-eval: the child process that runs one OpenSCAP evaluation of a directory tree.
//
// libopenscap keeps its probe root (OSCAP_PROBE_ROOT) process-wide and its chroot-mode probes
// chroot(2) the whole process, so an evaluation cannot share a process with anything else: the
// Evaluator starts this program once per batch of rules, inside its own sandbox (eval_sandbox.h),
// and reads its verdicts from stdout.
//
//   temper-stig-eval --datastream DS --profile ID --root DIR
//                    [--rule ID]... [--results FILE] [--arf FILE] [--fix FILE]
//   temper-stig-eval --read-results FILE --profile ID [--rule ID]...
//
// An evaluation keeps the target's files data (eval_confinement.h): it preloads what glibc would
// load lazily, forbids itself any new code (seccomp), refuses content that is not OVAL/OCIL from
// inside the datastream (content_policy.h) and loads no check-engine plugin (SCE) whatever the
// content says. It reads the benchmark from the host, then chroot(2)s into DIR, where it starts
// the OVAL probes (OSCAP_PROBE_ROOT "/.") and evaluates, so every path and symlink resolves inside
// the target, and leaves the chroot to write the results where the caller reads them. It needs
// CAP_SYS_CHROOT. What some libraries would read from the target as their own configuration (the
// mount table, rpm's macros) it answers itself (eval_overrides.cpp).
//
// The second form reads the verdicts of an evaluation made elsewhere (OpenSCAP on an SSH host
// writes results.xml there; it is copied back) from its XCCDF TestResult, so remote verdicts come
// from libopenscap's own parser and are printed and checked exactly like local ones.
//
// Output: one JSON object per line, {"rule": ID, "result": TOKEN} for each evaluated rule, where
// TOKEN is libopenscap's own xccdf_test_result_type_get_text. Exit 0 when the evaluation ran
// (whatever the verdicts), 1 with a message on stderr when it could not run or the content was
// refused, 2 for bad arguments.
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "stig/scap/content_policy.h"
#include "stig/scap/eval_confinement.h"
#include "stig/scap/oscap_api.h"

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
  std::string datastream, profile, root, results, arf, fix, read_results;
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
    else if (k == "--rule") a.rules.push_back(v);
    else if (k == "--results") a.results = v;
    else if (k == "--arf") a.arf = v;
    else if (k == "--fix") a.fix = v;
    else if (k == "--read-results") a.read_results = v;
    else return false;
  }
  if (!a.read_results.empty()) return !a.profile.empty() && a.datastream.empty() && a.root.empty();
  return !a.datastream.empty() && !a.profile.empty() && !a.root.empty();
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
// the evaluation's TestResult appended). The file comes from another host: no new code may enter
// the process before it is parsed.
int ReadResults(const Args& a) {
  if (temper::Status s = temper::stig::ForbidNewCode(); !s.ok()) return Fail(s.message());
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

// An evaluation of the tree at a.root, confined as the header says.
int Evaluate(const Args& a) {
  using temper::Status;
  if (Status s = temper::stig::PreloadLazyLibraries(); !s.ok()) return Fail(s.message());
  if (Status s = temper::stig::ForbidNewCode(); !s.ok()) return Fail(s.message());
  if (Status s = temper::stig::CheckContentPolicy(a.datastream); !s.ok()) return Fail(s.message());
  // Probes run in their offline modes over the root directory, which is the target once inside
  // the chroot. Spelt "/.", not "/": probes strip strlen(root) characters off the paths they find
  // (oval_fts.c), so "/" would turn "/etc/issue" into "etc/issue", which matches no object.
  setenv("OSCAP_PROBE_ROOT", "/.", 1);
  setenv("OSCAP_EVALUATION_TARGET", ("chroot://" + a.root).c_str(), 1);
  // The systemdunit* probes ask systemd over the system D-Bus, which a tree does not have: point
  // libdbus at an abstract socket of this process's own network namespace, where nothing
  // listens, so a service rule is "unknown" on every host instead of reporting anyone's units.
  setenv("DBUS_SYSTEM_BUS_ADDRESS", "unix:abstract=temper-eval-no-system-bus", 1);

  oscap_init();
  struct xccdf_session* s = xccdf_session_new(a.datastream.c_str());
  if (!s) return Fail("cannot open " + a.datastream + ": " + OscapError());
  xccdf_session_set_validation(s, false, false);
  for (const auto& r : a.rules) xccdf_session_add_rule(s, r.c_str());
  if (!a.results.empty()) xccdf_session_set_xccdf_export(s, a.results.c_str());
  if (!a.arf.empty()) xccdf_session_set_arf_export(s, a.arf.c_str());
  // xccdf_session_load in two halves, leaving out XCCDF_SESSION_LOAD_CHECK_ENGINE_PLUGINS: the SCE
  // plugin (libopenscap_sce.so) runs scripts, and no content may bring it in. The XCCDF benchmark
  // and the CPE dictionaries (the datastream's, and OpenSCAP's own from /usr/share/openscap/cpe)
  // are read here, from the host; the OVAL half below starts the probe sessions, whose first act
  // is to collect the system's facts (os-release, host name), so it runs inside the target.
  if (xccdf_session_load_xccdf(s) != 0 || xccdf_session_load_cpe(s) != 0) {
    return Fail("cannot load " + a.datastream + ": " + OscapError());
  }
  if (!xccdf_session_set_profile_id(s, a.profile.c_str())) {
    return Fail("no profile " + a.profile + " in " + a.datastream);
  }

  // The fix script is written inside the target too: choosing each rule's fixes evaluates their
  // platforms (CPE applicability), which must be the target's. Its file is opened out here.
  int fix_fd = -1;
  if (!a.fix.empty()) {
    fix_fd = ::open(a.fix.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fix_fd < 0) return Fail("cannot create " + a.fix);
  }
  temper::stig::TargetRoot target;
  if (Status st = target.Enter(a.root); !st.ok()) return Fail(st.message());
  std::string failed;
  struct xccdf_policy* policy = nullptr;
  struct xccdf_result* result = nullptr;
  if (xccdf_session_load_oval(s) != 0) {
    failed = "cannot load the OVAL checks of " + a.datastream + ": " + OscapError();
  } else if (xccdf_session_evaluate(s) != 0) {
    failed = "evaluation failed: " + OscapError();
  } else {
    policy = xccdf_session_get_xccdf_policy(s);
    result = xccdf_policy_get_result_by_id(policy, xccdf_session_get_result_id(s));
    if (!result) failed = "evaluation produced no TestResult: " + OscapError();
  }
  if (failed.empty() && fix_fd >= 0 &&
      xccdf_policy_generate_fix(policy, result, "urn:xccdf:fix:script:sh", fix_fd) != 0) {
    failed = "generating the fix script failed: " + OscapError();
  }
  if (fix_fd >= 0) ::close(fix_fd);
  if (Status st = target.Leave(); !st.ok()) return Fail(st.message());
  if (!failed.empty()) return Fail(failed);
  PrintVerdicts(result);

  // Exports only serialise what the evaluation collected; they run outside the target so that
  // they can write where the caller reads them (libopenscap takes paths, not descriptors).
  if (!a.results.empty() || !a.arf.empty()) {
    if (xccdf_session_export_oval(s) != 0 || xccdf_session_export_xccdf(s) != 0 || xccdf_session_export_arf(s) != 0) {
      return Fail("writing results failed: " + OscapError());
    }
  }
  std::fflush(stdout);
  xccdf_session_free(s);
  oscap_cleanup();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  if (!Parse(argc, argv, a)) {
    std::fprintf(stderr,
                 "usage: temper-stig-eval --datastream DS --profile ID --root DIR "
                 "[--rule ID]... [--results FILE] [--arf FILE] [--fix FILE]\n"
                 "       temper-stig-eval --read-results FILE --profile ID [--rule ID]...\n");
    return 2;
  }
  if (!a.read_results.empty()) return ReadResults(a);
  return Evaluate(a);
}
