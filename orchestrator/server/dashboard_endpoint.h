// DashboardEndpoint: temperd's live dashboard — one self-contained page (dashboard_page.html, no
// external assets) and the read-only JSON and event stream it draws from, on the `listen.dashboard`
// address. Off unless configured.
//
//   GET /                         the page
//   GET /api/batches              the latest batches (temper.v1.Batch as JSON, without rules; a
//                                 queued one with its waiting_reason, as GetBatch)
//   GET /api/batches/ID           the batch's report: rules, attempts with their change sets and
//                                 diffs, lessons, role usage, fixpoint passes (temper.v1.BatchReport)
//   GET /api/events?batch=ID      the journal as server-sent events (each a temper.v1.JournalEvent),
//                                 from ?after=SEQ or Last-Event-ID on, then live; without batch=,
//                                 every batch's events
//
// Access, as the API's: the page shows diffs of the target's files, so it is not for every local
// user. It listens on a loopback address only (plain HTTP; from elsewhere, an SSH tunnel) and every
// request needs the token of `token_file`: once as ?token= on the first visit (answered with an
// HttpOnly, SameSite=Strict cookie and a redirect that takes the token out of the address bar), or
// as "Authorization: Bearer". A Host header that does not name the loopback address is refused,
// so a web page elsewhere cannot reach the dashboard through DNS rebinding. Replies carry a
// Content-Security-Policy that allows the page's own inline code and connections to itself only,
// and the page writes every value as text, never as markup.
//
// Thread safety: Start and the destructor from one thread; requests on the listener's workers.
#pragma once

#include <memory>
#include <string>

#include "common/log.h"
#include "common/status.h"
#include "engine/serve/http_listener.h"
#include "orchestrator/loop/loop_runner.h"
#include "orchestrator/store/journal.h"
#include "orchestrator/store/state_store.h"

namespace temper {

class DashboardEndpoint {
 public:
  // Binds `host`:`port` (0: a free port); `host` must be a loopback address (InvalidArgument
  // otherwise). `store`, `journal`, `runner` (asked why a queued batch waits) and `log` must outlive
  // the endpoint. Unavailable naming the address when it cannot bind.
  static Result<std::unique_ptr<DashboardEndpoint>> Start(const std::string& host, int port, std::string token,
                                                          StateStore& store, Journal& journal, const LoopRunner& runner,
                                                          const Logger& log);
  ~DashboardEndpoint();
  DashboardEndpoint(const DashboardEndpoint&) = delete;
  DashboardEndpoint& operator=(const DashboardEndpoint&) = delete;

  int port() const { return listener_->port(); }

 private:
  DashboardEndpoint(std::string token, StateStore& store, Journal& journal, const LoopRunner& runner, const Logger& log)
      : token_(std::move(token)), store_(store), journal_(journal), runner_(runner), log_(log) {}
  // True when the request may be served; else fills `res` with the refusal.
  bool Admit(const httplib::Request& req, httplib::Response& res) const;
  void ServePage(const httplib::Request& req, httplib::Response& res) const;
  void ServeBatches(httplib::Response& res) const;
  void ServeBatch(const httplib::Request& req, httplib::Response& res) const;
  void ServeEvents(const httplib::Request& req, httplib::Response& res);

  const std::string token_;
  StateStore& store_;
  Journal& journal_;
  const LoopRunner& runner_;
  const Logger& log_;
  std::string host_;  // as bound, for the Host check
  engine::HttpRouter router_;
  std::unique_ptr<engine::HttpListener> listener_;  // last: stopped before the rest goes
};

}  // namespace temper
