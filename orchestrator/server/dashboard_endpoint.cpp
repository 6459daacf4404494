#include "orchestrator/server/dashboard_endpoint.h"

#include <charconv>
#include <chrono>
#include <optional>

#include <fmt/format.h>
#include <google/protobuf/util/json_util.h>

#include "common/loopback.h"
#include "orchestrator/loop/proven_fix.h"
#include "orchestrator/proto_convert.h"
#include "orchestrator/server/dashboard_page.h"
#include "orchestrator/token_auth.h"
#include "temper/v1/temper.pb.h"

namespace temper {
namespace {

constexpr std::string_view kCookie = "temper_dashboard";
constexpr uint32_t kBatchesListed = 100;
constexpr uint32_t kEventsPerRead = 256;
// How long a stream waits for the journal before it checks whether its client is still there.
constexpr auto kEventPoll = std::chrono::milliseconds(250);
// A comment line on a quiet stream this often, so proxies and browsers keep it open.
constexpr auto kKeepAlive = std::chrono::seconds(15);

constexpr const char* kSecurityPolicy =
    "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; "
    "img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

std::string Json(const google::protobuf::Message& m) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  std::string out;
  if (!google::protobuf::util::MessageToJsonString(m, &out, options).ok()) return "{}";
  return out;
}

void Refuse(httplib::Response& res, int status, const std::string& message) {
  res.status = status;
  res.set_content(message + "\n", "text/plain; charset=utf-8");
}

void SetCommonHeaders(httplib::Response& res) {
  res.set_header("Content-Security-Policy", kSecurityPolicy);
  res.set_header("X-Content-Type-Options", "nosniff");
  res.set_header("Referrer-Policy", "no-referrer");
  res.set_header("Cache-Control", "no-store");
}

// The value of cookie `name` in a Cookie header, if there.
std::optional<std::string> CookieValue(const std::string& header, std::string_view name) {
  size_t at = 0;
  while (at < header.size()) {
    size_t end = header.find(';', at);
    if (end == std::string::npos) end = header.size();
    std::string_view pair = std::string_view(header).substr(at, end - at);
    while (!pair.empty() && pair.front() == ' ') pair.remove_prefix(1);
    if (pair.size() > name.size() && pair.substr(0, name.size()) == name && pair[name.size()] == '=') {
      return std::string(pair.substr(name.size() + 1));
    }
    at = end + 1;
  }
  return std::nullopt;
}

std::optional<uint64_t> ParseNumber(const std::string& text) {
  uint64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

// The host of a Host header: "127.0.0.1:9465" -> "127.0.0.1", "[::1]:80" -> "::1".
std::string HostOf(const std::string& header) {
  if (!header.empty() && header.front() == '[') {
    size_t close = header.find(']');
    return close == std::string::npos ? header : header.substr(1, close - 1);
  }
  size_t colon = header.rfind(':');
  return colon == std::string::npos ? header : header.substr(0, colon);
}

// DNS rebinding: a page elsewhere whose name now resolves to 127.0.0.1 still sends its own Host.
// False, with the refusal in `res`, when the request names another host.
bool AddressedToLoopback(const httplib::Request& req, httplib::Response& res) {
  if (IsLoopbackHost(HostOf(req.get_header_value("Host")))) return true;
  Refuse(res, 403, "the dashboard answers only requests addressed to this machine's loopback address");
  return false;
}

}  // namespace

Result<std::unique_ptr<DashboardEndpoint>> DashboardEndpoint::Start(const std::string& host, int port,
                                                                    std::string token, StateStore& store,
                                                                    Journal& journal, const LoopRunner& runner,
                                                                    const Logger& log) {
  if (!IsLoopbackHost(host)) {
    return Status::InvalidArgument(
        fmt::format("dashboard: {} is not a loopback address: the dashboard serves plain HTTP, so it listens on this "
                    "machine only (reach it from elsewhere through an SSH tunnel)",
                    host));
  }
  if (token.empty()) return Status::InvalidArgument("dashboard: the token is empty");
  std::unique_ptr<DashboardEndpoint> e(new DashboardEndpoint(std::move(token), store, journal, runner, log));
  e->host_ = host;
  DashboardEndpoint* self = e.get();
  e->router_.Get("/", [self](const httplib::Request& req, httplib::Response& res) { self->ServePage(req, res); });
  e->router_.Get("/api/batches", [self](const httplib::Request& req, httplib::Response& res) {
    if (self->Admit(req, res)) self->ServeBatches(res);
  });
  e->router_.Get(R"(/api/batches/(\d+))", [self](const httplib::Request& req, httplib::Response& res) {
    if (self->Admit(req, res)) self->ServeBatch(req, res);
  });
  e->router_.Get("/api/events", [self](const httplib::Request& req, httplib::Response& res) {
    if (self->Admit(req, res)) self->ServeEvents(req, res);
  });
  engine::HttpListenerOptions listen;
  listen.host = host;
  listen.port = port;
  listen.workers = 8;  // each open page holds one for its event stream
  listen.max_connections = 64;
  listen.max_body_bytes = 0;
  listen.error_body = [](int status, const std::string& message) {
    return std::to_string(status) + " " + message + "\n";
  };
  TEMPER_ASSIGN_OR_RETURN(e->listener_, engine::HttpListener::Start(e->router_, std::move(listen), log));
  return e;
}

DashboardEndpoint::~DashboardEndpoint() {
  if (listener_) listener_->Stop();
}

bool DashboardEndpoint::Admit(const httplib::Request& req, httplib::Response& res) const {
  SetCommonHeaders(res);
  if (!AddressedToLoopback(req, res)) return false;
  std::optional<std::string> given = CookieValue(req.get_header_value("Cookie"), kCookie);
  const std::string auth = req.get_header_value("Authorization");
  if (!given && auth.rfind("Bearer ", 0) == 0) given = auth.substr(7);
  if (!given || !ConstantTimeEquals(*given, token_)) {
    Refuse(res, 401,
           "the dashboard needs temperd's dashboard token: open http://HOST:PORT/?token=TOKEN once (the token "
           "is in the file listen.dashboard.token_file names)");
    return false;
  }
  return true;
}

void DashboardEndpoint::ServePage(const httplib::Request& req, httplib::Response& res) const {
  SetCommonHeaders(res);
  if (req.has_param("token")) {
    if (!AddressedToLoopback(req, res)) return;
    if (!ConstantTimeEquals(req.get_param_value("token"), token_)) {
      Refuse(res, 401, "that is not temperd's dashboard token");
      return;
    }
    // The token moves into a cookie the page's scripts cannot read, and out of the address bar.
    res.set_header("Set-Cookie", fmt::format("{}={}; Path=/; HttpOnly; SameSite=Strict", kCookie, token_));
    res.set_redirect("/", 303);
    return;
  }
  if (!Admit(req, res)) return;
  res.set_content(std::string(kDashboardPage), "text/html; charset=utf-8");
}

void DashboardEndpoint::ServeBatches(httplib::Response& res) const {
  Result<StateStore::BatchPage> page = store_.ListBatches(std::nullopt, kBatchesListed, {});
  if (!page.ok()) {
    log_.Error("dashboard: {}", page.status().ToString());
    return Refuse(res, 500, page.status().message());
  }
  temper::v1::ListBatchesResponse out;
  for (const BatchRecord& b : page->batches) {
    temper::v1::Batch* batch = out.add_batches();
    ToProto(b, batch);
    batch->set_waiting_reason(runner_.WhyWaiting(b));
  }
  res.set_content(Json(out), "application/json");
}

void DashboardEndpoint::ServeBatch(const httplib::Request& req, httplib::Response& res) const {
  std::optional<uint64_t> id = ParseNumber(req.matches[1]);
  if (!id || *id == 0 || *id > static_cast<uint64_t>(INT64_MAX)) return Refuse(res, 404, "no such batch");
  const int64_t batch_id = static_cast<int64_t>(*id);
  Result<BatchRecord> batch = store_.GetBatch(batch_id);
  if (!batch.ok())
    return Refuse(res, batch.status().code() == StatusCode::kNotFound ? 404 : 500, batch.status().message());
  Result<std::vector<AttemptRecord>> attempts = store_.BatchAttempts(batch_id);
  Result<std::vector<LessonRecord>> lessons = store_.BatchLessons(batch_id);
  Result<std::vector<RoleUsageRecord>> usage = store_.BatchRoleUsage(batch_id);
  Result<LibraryUse> library = BatchLibraryUse(store_, batch_id);
  for (const Status& s : {attempts.status(), lessons.status(), usage.status(), library.status()}) {
    if (!s.ok()) {
      log_.Error("dashboard: batch {}: {}", batch_id, s.ToString());
      return Refuse(res, 500, s.message());
    }
  }
  temper::v1::BatchReport report;
  ToProto(*batch, report.mutable_batch());
  report.mutable_batch()->set_waiting_reason(runner_.WhyWaiting(*batch));
  report.set_results_dir(batch->results_dir);
  for (const FixpointPass& p : batch->fixpoint) ToProto(p, report.add_fixpoint_passes());
  for (const RoleUsageRecord& u : *usage) ToProto(u, report.add_role_usage());
  if (library->tried > 0) ToProto(*library, report.mutable_library());
  for (const AttemptRecord& a : *attempts) ToProto(a, report.add_attempts());
  for (const LessonRecord& l : *lessons) ToProto(l, report.add_lessons());
  res.set_content(Json(report), "application/json");
}

void DashboardEndpoint::ServeEvents(const httplib::Request& req, httplib::Response& res) {
  std::optional<int64_t> batch_id;
  if (req.has_param("batch")) {
    std::optional<uint64_t> id = ParseNumber(req.get_param_value("batch"));
    if (!id || *id == 0 || *id > static_cast<uint64_t>(INT64_MAX)) return Refuse(res, 400, "batch: not a batch id");
    batch_id = static_cast<int64_t>(*id);
  }
  const std::string resume =
      req.has_header("Last-Event-ID") ? req.get_header_value("Last-Event-ID") : req.get_param_value("after");
  uint64_t after = 0;
  if (!resume.empty()) {
    std::optional<uint64_t> seq = ParseNumber(resume);
    if (!seq) return Refuse(res, 400, "after: not a journal sequence number");
    after = *seq;
  }
  auto client = listener_->ConnectionOf(req);
  auto cursor = std::make_shared<uint64_t>(after);
  auto last_write = std::make_shared<std::chrono::steady_clock::time_point>(std::chrono::steady_clock::now());
  // httplib calls the provider again as long as it returns true and the listener serves, so each
  // call waits at most kEventPoll: a stopping listener or a client gone ends the stream promptly.
  res.set_chunked_content_provider(
      "text/event-stream", [this, client, cursor, last_write, batch_id](size_t, httplib::DataSink& sink) {
        if (journal_.closed() || (client && client->ClientGone())) {
          sink.done();
          return true;
        }
        const uint64_t horizon = journal_.last_seq();
        Result<std::vector<EventRecord>> events = store_.ReadEvents(*cursor, batch_id, kEventsPerRead);
        if (!events.ok()) {
          log_.Error("dashboard: events: {}", events.status().ToString());
          return false;
        }
        std::string out;
        for (const EventRecord& e : *events) {
          temper::v1::JournalEvent proto;
          ToProto(e, &proto);
          out += fmt::format("id: {}\nevent: journal\ndata: {}\n\n", e.seq, Json(proto));
          *cursor = e.seq;
        }
        const auto now = std::chrono::steady_clock::now();
        if (out.empty() && now - *last_write >= kKeepAlive) out = ":\n\n";  // a comment: the stream lives
        if (!out.empty()) {
          *last_write = now;
          return sink.write(out.data(), out.size());
        }
        journal_.WaitBeyond(std::max(horizon, *cursor), now + kEventPoll);
        return true;
      });
}

}  // namespace temper
