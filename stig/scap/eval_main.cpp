// temper-stig-eval: the process that runs OpenSCAP evaluations of directory trees.
//
// libopenscap keeps its probe root (OSCAP_PROBE_ROOT) process-wide and its chroot-mode probes
// chroot(2) the whole process, so an evaluation cannot share a process with anything else: each
// runs in a process of its own, inside this program's own sandbox (eval_sandbox.h), either this
// program started for one batch of rules (the first form) or a child forked per evaluation by
// its server (the second form), and the Evaluator reads the verdicts it prints.
//
//   temper-stig-eval --datastream DS --profile ID --root DIR
//                    [--rule ID]... [--results FILE] [--arf FILE] [--fix FILE] [--target-name NAME]
//   temper-stig-eval --serve --datastream DS --profile ID
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
// The second form (eval_server.h) confines itself and loads the benchmark once, then serves
// evaluations over the UNIX socket at fd 0 (stdin and stdout): it writes {"ready": true} once
// loaded; each request is one JSON line {"root": PATH, "rules": [ID...], "results": BOOL,
// "fix": BOOL} sent with the tree's directory descriptor (and, with "results", the output
// directory's) as SCM_RIGHTS. For each it forks a child that chroot(2)s through the descriptor and
// evaluates exactly as the first form does (one shared function), writes the verdict lines, and
// exports results.xml, arf.xml (and fix.sh) into the output directory; the server then writes
// {"end": true, "exit": N} or {"end": true, "signal": N} (with "stderr" when it failed), or
// {"end": true, "error": TEXT} for a request it could not run. The server itself never loads OVAL
// or evaluates, so it has no threads when it forks, and each child starts from the same loaded
// benchmark whatever an earlier child did.
//
// The third form reads the verdicts of an evaluation made elsewhere (OpenSCAP on an SSH host
// writes results.xml there; it is copied back) from its XCCDF TestResult, so remote verdicts come
// from libopenscap's own parser and are printed and checked exactly like local ones.
//
// Output: one JSON object per line, {"rule": ID, "result": TOKEN} for each evaluated rule, where
// TOKEN is libopenscap's own xccdf_test_result_type_get_text. Exit 0 when the evaluation ran
// (whatever the verdicts), 1 with a message on stderr when it could not run or the content was
// refused, 2 for bad arguments.
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
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
  std::string datastream, profile, root, results, arf, fix, read_results, target_name;
  std::vector<std::string> rules;
  bool serve = false;
};

bool Parse(int argc, char** argv, Args& a) {
  for (int i = 1; i < argc; ++i) {
    std::string k = argv[i];
    if (k == "--serve") {
      a.serve = true;
      continue;
    }
    if (i + 1 >= argc) return false;
    std::string v = argv[++i];
    if (k == "--datastream") a.datastream = v;
    else if (k == "--profile") a.profile = v;
    else if (k == "--root") a.root = v;
    else if (k == "--rule") a.rules.push_back(v);
    else if (k == "--results") a.results = v;
    else if (k == "--arf") a.arf = v;
    else if (k == "--fix") a.fix = v;
    else if (k == "--target-name") a.target_name = v;
    else if (k == "--read-results") a.read_results = v;
    else return false;
  }
  if (!a.read_results.empty()) return !a.profile.empty() && a.datastream.empty() && a.root.empty() && !a.serve;
  if (a.serve) return !a.datastream.empty() && !a.profile.empty() && a.root.empty() && a.rules.empty();
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

// What every evaluation does to the process before it reads any content: confined as the header says.
int Confine(const std::string& datastream) {
  using temper::Status;
  if (Status s = temper::stig::PreloadLazyLibraries(); !s.ok()) return Fail(s.message());
  if (Status s = temper::stig::ForbidNewCode(); !s.ok()) return Fail(s.message());
  if (Status s = temper::stig::CheckContentPolicy(datastream); !s.ok()) return Fail(s.message());
  // Probes run in their offline modes over the root directory, which is the target once inside
  // the chroot. Spelt "/.", not "/": probes strip strlen(root) characters off the paths they find
  // (oval_fts.c), so "/" would turn "/etc/issue" into "etc/issue", which matches no object.
  setenv("OSCAP_PROBE_ROOT", "/.", 1);
  // The systemdunit* probes ask systemd over the system D-Bus, which a tree does not have: point
  // libdbus at an abstract socket of this process's own network namespace, where nothing
  // listens, so a service rule is "unknown" on every host instead of reporting anyone's units.
  setenv("DBUS_SYSTEM_BUS_ADDRESS", "unix:abstract=temper-eval-no-system-bus", 1);
  return 0;
}

// The benchmark and CPE dictionaries of `datastream` with `profile` selected, or null after Fail.
// xccdf_session_load in two halves, leaving out XCCDF_SESSION_LOAD_CHECK_ENGINE_PLUGINS: the SCE
// plugin (libopenscap_sce.so) runs scripts, and no content may bring it in. The XCCDF benchmark
// and the CPE dictionaries (the datastream's, and OpenSCAP's own from /usr/share/openscap/cpe)
// are read here, from the host; the OVAL half (EvaluateTree) starts the probe sessions, whose
// first act is to collect the system's facts (os-release, host name), so it runs inside the target.
struct xccdf_session* LoadBenchmark(const std::string& datastream, const std::string& profile) {
  oscap_init();
  struct xccdf_session* s = xccdf_session_new(datastream.c_str());
  if (!s) {
    Fail("cannot open " + datastream + ": " + OscapError());
    return nullptr;
  }
  xccdf_session_set_validation(s, false, false);
  if (xccdf_session_load_xccdf(s) != 0 || xccdf_session_load_cpe(s) != 0) {
    Fail("cannot load " + datastream + ": " + OscapError());
  } else if (!xccdf_session_set_profile_id(s, profile.c_str())) {
    Fail("no profile " + profile + " in " + datastream);
  } else {
    return s;
  }
  xccdf_session_free(s);
  return nullptr;
}

// One evaluation of a tree with a loaded benchmark: the one-shot mode's and each of the server's.
struct Job {
  std::string datastream;  // for messages
  std::string root;        // the tree's host path, for messages and OSCAP_EVALUATION_TARGET
  std::vector<std::string> rules;
  std::function<temper::Status(temper::stig::TargetRoot&)> enter;  // chroot(2)s into the tree
  // Where results are written once out of the tree: the directory's descriptor (-1: the paths below
  // are absolute) and the files' paths, empty for none. `fix_fd` is open already, or -1.
  int out_dir_fd = -1;
  std::string results, arf;
  int fix_fd = -1;
  std::string target_name;  // the results' <target>; empty: OpenSCAP's (the evaluating host's name)
};

// Names `target` as what the result was taken on, in place of the host OpenSCAP found itself on.
void NameTarget(struct xccdf_result* result, const std::string& target) {
  struct oscap_string_iterator* it = xccdf_result_get_targets(result);
  while (oscap_string_iterator_has_more(it)) {
    oscap_string_iterator_next(it);
    oscap_string_iterator_remove(it);
  }
  oscap_string_iterator_free(it);
  xccdf_result_add_target(result, target.c_str());
}

int EvaluateTree(struct xccdf_session* s, const Job& job) {
  setenv("OSCAP_EVALUATION_TARGET", ("chroot://" + job.root).c_str(), 1);
  for (const auto& r : job.rules) xccdf_session_add_rule(s, r.c_str());
  if (!job.results.empty()) xccdf_session_set_xccdf_export(s, job.results.c_str());
  if (!job.arf.empty()) xccdf_session_set_arf_export(s, job.arf.c_str());

  // The fix script is written inside the target too: choosing each rule's fixes evaluates their
  // platforms (CPE applicability), which must be the target's. Its file was opened out there.
  temper::stig::TargetRoot target;
  if (temper::Status st = job.enter(target); !st.ok()) return Fail(st.message());
  std::string failed;
  struct xccdf_policy* policy = nullptr;
  struct xccdf_result* result = nullptr;
  if (xccdf_session_load_oval(s) != 0) {
    failed = "cannot load the OVAL checks of " + job.datastream + ": " + OscapError();
  } else if (xccdf_session_evaluate(s) != 0) {
    failed = "evaluation failed: " + OscapError();
  } else {
    policy = xccdf_session_get_xccdf_policy(s);
    result = xccdf_policy_get_result_by_id(policy, xccdf_session_get_result_id(s));
    if (!result) failed = "evaluation produced no TestResult: " + OscapError();
  }
  if (failed.empty() && job.fix_fd >= 0 &&
      xccdf_policy_generate_fix(policy, result, "urn:xccdf:fix:script:sh", job.fix_fd) != 0) {
    failed = "generating the fix script failed: " + OscapError();
  }
  if (temper::Status st = target.Leave(); !st.ok()) return Fail(st.message());
  if (!failed.empty()) return Fail(failed);
  if (!job.target_name.empty()) NameTarget(result, job.target_name);
  PrintVerdicts(result);
  std::fflush(stdout);

  // Exports only serialise what the evaluation collected; they run outside the target so that
  // they can write where the caller reads them (libopenscap takes paths, not descriptors).
  if (!job.results.empty() || !job.arf.empty()) {
    if (job.out_dir_fd >= 0 && ::fchdir(job.out_dir_fd) != 0) return Fail("cannot enter the output directory");
    if (xccdf_session_export_oval(s) != 0 || xccdf_session_export_xccdf(s) != 0 || xccdf_session_export_arf(s) != 0) {
      return Fail("writing results failed: " + OscapError());
    }
  }
  return 0;
}

// An evaluation of the tree at a.root, confined as the header says.
int Evaluate(const Args& a) {
  if (int rc = Confine(a.datastream); rc != 0) return rc;
  struct xccdf_session* s = LoadBenchmark(a.datastream, a.profile);
  if (!s) return 1;
  Job job{.datastream = a.datastream,
          .root = a.root,
          .rules = a.rules,
          .enter = [&](temper::stig::TargetRoot& t) { return t.Enter(a.root); },
          .results = a.results,
          .arf = a.arf,
          .target_name = a.target_name};
  if (!a.fix.empty()) {
    job.fix_fd = ::open(a.fix.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (job.fix_fd < 0) return Fail("cannot create " + a.fix);
  }
  int rc = EvaluateTree(s, job);
  if (job.fix_fd >= 0) ::close(job.fix_fd);
  xccdf_session_free(s);
  oscap_cleanup();
  return rc;
}

// Reads one request line from the socket at fd 0 with the descriptors that came with it. False at
// end of input or on a read error.
bool ReadRequest(std::string& line, std::vector<int>& fds) {
  line.clear();
  fds.clear();
  for (;;) {
    char c;
    struct iovec iov {
      &c, 1
    };
    alignas(struct cmsghdr) char control[CMSG_SPACE(sizeof(int) * 2)];
    struct msghdr msg {};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    ssize_t n = ::recvmsg(0, &msg, MSG_CMSG_CLOEXEC);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    for (struct cmsghdr* h = CMSG_FIRSTHDR(&msg); h; h = CMSG_NXTHDR(&msg, h)) {
      if (h->cmsg_level != SOL_SOCKET || h->cmsg_type != SCM_RIGHTS) continue;
      std::size_t count = (h->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (std::size_t i = 0; i < count; ++i) {
        int fd;
        std::memcpy(&fd, CMSG_DATA(h) + i * sizeof(int), sizeof fd);
        fds.push_back(fd);
      }
    }
    if (c == '\n') return true;
    line.push_back(c);
  }
}

void WriteLine(const nlohmann::json& j) {
  std::printf("%s\n", j.dump().c_str());
  std::fflush(stdout);
}

// The end of one request: how its child ended, with its stderr when it failed.
void WriteEnd(int status, const std::string& err) {
  nlohmann::json end = {{"end", true}};
  if (WIFEXITED(status)) end["exit"] = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) end["signal"] = WTERMSIG(status);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) end["stderr"] = err;
  // On a line of its own even when a killed child left half a verdict line (the reader skips
  // empty lines).
  std::printf("\n");
  WriteLine(end);
}

// One request of the server (see the header): a child evaluates, the server reports how it ended.
// The descriptors of a request are closed before its end is written: the caller unmounts the tree
// once it has the answer, and a descriptor still open here would keep the mount busy.
void CloseAll(const std::vector<int>& fds) {
  for (int fd : fds) ::close(fd);
}

void Serve(struct xccdf_session* s, const Args& a, const std::string& line, const std::vector<int>& fds) {
  nlohmann::json req = nlohmann::json::parse(line, nullptr, false);
  bool results = req.is_object() && req.value("results", false);
  bool valid = req.is_object() && req.contains("rules") && req["rules"].is_array() && req.contains("root") &&
               req["root"].is_string() && fds.size() == (results ? 2u : 1u);
  if (valid) {
    for (const auto& r : req["rules"]) valid = valid && r.is_string();
  }
  if (!valid) {
    CloseAll(fds);
    WriteLine({{"end", true}, {"error", "malformed request (" + std::to_string(fds.size()) + " fds): " + line}});
    return;
  }
  int err_pipe[2];
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) {
    CloseAll(fds);
    WriteLine({{"end", true}, {"error", "pipe: " + std::string(std::strerror(errno))}});
    return;
  }
  std::fflush(stdout);
  std::fflush(stderr);
  pid_t pid = ::fork();
  if (pid < 0) {
    const std::string why = std::strerror(errno);
    ::close(err_pipe[0]);
    ::close(err_pipe[1]);
    CloseAll(fds);
    WriteLine({{"end", true}, {"error", "fork: " + why}});
    return;
  }
  if (pid == 0) {
    ::dup2(err_pipe[1], 2);
    Job job{.datastream = a.datastream,
            .root = req["root"].get<std::string>(),
            .rules = req["rules"].get<std::vector<std::string>>(),
            .enter = [&](temper::stig::TargetRoot& t) { return t.Enter(fds[0], job.root); },
            .target_name = req.value("target", "")};
    if (results) {
      job.out_dir_fd = fds[1];
      job.results = "results.xml";
      job.arf = "arf.xml";
      if (req.value("fix", false)) {
        job.fix_fd = ::openat(fds[1], "fix.sh", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (job.fix_fd < 0) ::_exit(Fail("cannot create fix.sh in the output directory"));
      }
    }
    int rc = EvaluateTree(s, job);
    std::fflush(stdout);
    std::fflush(stderr);
    ::_exit(rc);
  }
  ::close(err_pipe[1]);
  CloseAll(fds);
  std::string err;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(err_pipe[0], buf, sizeof buf)) != 0) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    if (err.size() < 65536) err.append(buf, static_cast<std::size_t>(n));
  }
  ::close(err_pipe[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  WriteEnd(status, err);
}

// The server: one benchmark load, then one forked evaluation per request.
int ServeRequests(const Args& a) {
  if (int rc = Confine(a.datastream); rc != 0) return rc;
  struct xccdf_session* s = LoadBenchmark(a.datastream, a.profile);
  if (!s) return 1;
  WriteLine({{"ready", true}});
  std::string line;
  std::vector<int> fds;
  while (ReadRequest(line, fds)) {
    Serve(s, a, line, fds);
  }
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
                 "       temper-stig-eval --serve --datastream DS --profile ID\n"
                 "       temper-stig-eval --read-results FILE --profile ID [--rule ID]...\n");
    return 2;
  }
  if (!a.read_results.empty()) return ReadResults(a);
  if (a.serve) return ServeRequests(a);
  return Evaluate(a);
}
