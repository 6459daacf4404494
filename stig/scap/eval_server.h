// EvalServer: one running `temper-stig-eval --serve` (eval_main.cpp), which has loaded a datastream's
// benchmark once and evaluates a tree per request in a forked child.
//
// Loading the content is most of a small evaluation (about 0.45 s of a one-rule evaluation), so
// the Evaluator keeps servers running and sends each evaluation to one instead of starting the
// helper afresh. The server runs in the same sandbox as the one-shot helper (eval_sandbox.h) but
// with no tree bound: each request passes the tree's directory descriptor (and the output
// directory's) over the socket, and the child chroot(2)s through it, so the tree may be a fresh
// scratch view each time and every path and symlink still resolves inside it.
//
// Contract: one request at a time (the caller serialises; the Evaluator gives each caller its own
// server). A request that times out, or any answer that breaks the protocol (the server gone, a
// malformed line), leaves the server broken(), its whole process tree killed and gone (the
// evaluation child may be inside a tree the caller unmounts next): the caller discards it. The
// destructor does the same. A child that
// fails or is killed ends only its request (Reply::failure), not the server. The server inherits
// PR_SET_PDEATHSIG from RunProcess's child setup: it dies with the thread that started it, which
// its next request sees as a broken server.
//
// Thread safety: none; one owner at a time.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "platform/process.h"
#include "platform/unique_fd.h"

namespace temper::stig {

class EvalServer {
 public:
  // Starts `spec` (the sandboxed `temper-stig-eval --serve ...`; its stdio is set here) and waits
  // up to `timeout` for it to have loaded the content. Errors: those of StartProcess; Internal
  // with the server's stderr when it ends or says something else before it is ready;
  // DeadlineExceeded past `timeout`.
  static Result<std::unique_ptr<EvalServer>> Start(const ProcessSpec& spec, std::chrono::milliseconds timeout);
  ~EvalServer();
  EvalServer(const EvalServer&) = delete;
  EvalServer& operator=(const EvalServer&) = delete;

  struct Request {
    std::string root;  // the tree's path, for messages and OSCAP_EVALUATION_TARGET
    std::vector<std::string> rules;
    int tree_fd = -1;         // an open directory
    int out_dir_fd = -1;      // -1: no results files
    bool fix = false;         // with out_dir_fd: also fix.sh
    std::string target_name;  // with out_dir_fd: the results' <target>; empty: the host's name
  };
  struct Reply {
    std::string out;      // the child's verdict lines
    std::string failure;  // empty when the child exited 0; else how it ended and its stderr
    double seconds = 0;
  };
  // Errors: DeadlineExceeded past `timeout`; Internal when the server breaks the protocol or is
  // gone (both leave it broken()).
  Result<Reply> Evaluate(const Request& request, std::chrono::milliseconds timeout);

  bool broken() const { return broken_; }
  pid_t pid() const { return pid_; }

 private:
  EvalServer(pid_t pid, UniqueFd socket, UniqueFd err) : pid_(pid), socket_(std::move(socket)), err_(std::move(err)) {}

  // The next line from the server, within `deadline`. Errors as Evaluate's.
  Result<std::string> ReadLine(std::chrono::steady_clock::time_point deadline);
  // What the server wrote to its stderr so far.
  std::string DrainStderr();
  Status Break(Status s);
  // Kills the server's whole process tree and waits until all of it is gone (once).
  void KillTree();

  pid_t pid_;
  UniqueFd socket_;
  UniqueFd err_;
  std::string buffer_;  // read past the last line
  bool broken_ = false;
  bool killed_ = false;
};

}  // namespace temper::stig
