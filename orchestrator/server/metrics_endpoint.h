// MetricsEndpoint: temperd's GET /metrics over plain HTTP on the `metrics:` address (localhost
// unless configured otherwise), for Prometheus to scrape. It serves DaemonMetrics and nothing
// else: no batch, rule or host names, only counts by state, role and endpoint. The listener is
// the one `temper-lm serve` uses (engine/serve/http_listener.h), with its deadlines against slow
// or hostile clients; a request body is refused.
//
// Thread safety: Start and the destructor from one thread.
#pragma once

#include <memory>
#include <string>

#include "common/log.h"
#include "common/status.h"
#include "engine/serve/http_listener.h"
#include "orchestrator/server/daemon_metrics.h"

namespace temper {

class MetricsEndpoint {
 public:
  // Binds `host`:`port` (0: a free port). `metrics` and `log` must outlive the endpoint.
  // Unavailable naming the address when it cannot bind.
  static Result<std::unique_ptr<MetricsEndpoint>> Start(const std::string& host, int port, DaemonMetrics& metrics,
                                                        const Logger& log);
  ~MetricsEndpoint();
  MetricsEndpoint(const MetricsEndpoint&) = delete;
  MetricsEndpoint& operator=(const MetricsEndpoint&) = delete;

  int port() const { return listener_->port(); }

 private:
  MetricsEndpoint() = default;
  engine::HttpRouter router_;
  std::unique_ptr<engine::HttpListener> listener_;  // after router_: stopped before it goes
};

}  // namespace temper
