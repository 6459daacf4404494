#include "orchestrator/server/metrics_endpoint.h"

namespace temper {

Result<std::unique_ptr<MetricsEndpoint>> MetricsEndpoint::Start(const std::string& host, int port,
                                                                DaemonMetrics& metrics, const Logger& log) {
  std::unique_ptr<MetricsEndpoint> e(new MetricsEndpoint());
  e->router_.Get("/metrics", [&metrics, &log](const httplib::Request&, httplib::Response& res) {
    Result<std::string> body = metrics.Render();
    if (!body.ok()) {
      log.Error("metrics: {}", body.status().ToString());
      res.status = 500;
      res.set_content("metrics: " + body.status().message() + "\n", "text/plain");
      return;
    }
    res.set_content(std::move(*body), "text/plain; version=0.0.4");
  });
  engine::HttpListenerOptions listen;
  listen.host = host;
  listen.port = port;
  listen.workers = 2;  // a scraper or two
  listen.max_connections = 64;
  listen.max_body_bytes = 0;
  listen.error_body = [](int status, const std::string& message) {
    return std::to_string(status) + " " + message + "\n";
  };
  TEMPER_ASSIGN_OR_RETURN(e->listener_, engine::HttpListener::Start(e->router_, std::move(listen), log));
  return e;
}

MetricsEndpoint::~MetricsEndpoint() {
  if (listener_) listener_->Stop();
}

}  // namespace temper
