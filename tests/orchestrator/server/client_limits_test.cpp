#include "orchestrator/server/client_limits.h"

#include <optional>
#include <set>
#include <vector>

#include <catch2/catch.hpp>

namespace temper {
namespace {

ClientLimitsConfig Small() {
  ClientLimitsConfig limits;
  limits.active_batches_per_client = 2;
  limits.rules_per_batch = 10;
  limits.parallel_attempts_per_batch = 2;
  limits.watch_streams_per_client = 2;
  limits.watch_streams_total = 3;
  return limits;
}

TEST_CASE("client limits: watch streams per client and in all, admins exempt from the first, slots given back") {
  ClientLimits limits(Small());
  std::vector<ClientLimits::WatchSlot> open;
  for (int i = 0; i < 2; ++i) {
    auto slot = limits.OpenWatch("unix:1000", false);
    REQUIRE(slot.ok());
    open.push_back(std::move(*slot));
  }
  Result<ClientLimits::WatchSlot> third = limits.OpenWatch("unix:1000", false);
  CHECK(third.status().code() == StatusCode::kResourceExhausted);
  CHECK_THAT(third.status().message(),
             Catch::Contains("unix:1000") && Catch::Contains("limits.watch_streams_per_client"));
  CHECK(limits.watch_streams("unix:1000") == 2);

  // An admin passes the per-client limit, but not the total.
  auto admin = limits.OpenWatch("unix:0", true);
  REQUIRE(admin.ok());
  Result<ClientLimits::WatchSlot> over = limits.OpenWatch("unix:0", true);
  CHECK(over.status().code() == StatusCode::kResourceExhausted);
  CHECK_THAT(over.status().message(), Catch::Contains("limits.watch_streams_total"));
  CHECK(limits.watch_streams_total() == 3);

  open.pop_back();
  CHECK(limits.watch_streams("unix:1000") == 1);
  CHECK(limits.OpenWatch("unix:1000", false).ok());  // destroyed at once: the slot is free again
  CHECK(limits.watch_streams_total() == 2);
}

TEST_CASE("client limits: active batches, rules and parallel attempts per client, admins exempt") {
  ClientLimits limits(Small());
  std::set<int64_t> active;
  auto still_active = [&](int64_t id) { return active.count(id) > 0; };

  auto rules = limits.ReserveBatch("token:ci", false, 11, 1, still_active);
  CHECK(rules.status().code() == StatusCode::kResourceExhausted);
  CHECK_THAT(rules.status().message(), Catch::Contains("limits.rules_per_batch"));
  auto parallel = limits.ReserveBatch("token:ci", false, 1, 3, still_active);
  CHECK(parallel.status().code() == StatusCode::kResourceExhausted);
  CHECK_THAT(parallel.status().message(), Catch::Contains("limits.parallel_attempts_per_batch"));

  for (int64_t id : {1, 2}) {
    auto ticket = limits.ReserveBatch("token:ci", false, 10, 2, still_active);
    REQUIRE(ticket.ok());
    ticket->Submitted(id);
    active.insert(id);
  }
  auto third = limits.ReserveBatch("token:ci", false, 1, 1, still_active);
  CHECK(third.status().code() == StatusCode::kResourceExhausted);
  CHECK_THAT(third.status().message(),
             Catch::Contains("token:ci") && Catch::Contains("limits.active_batches_per_client"));
  // Another client, and an admin, are not held up by this one.
  CHECK(limits.ReserveBatch("token:other", false, 1, 1, still_active).ok());
  CHECK(limits.ReserveBatch("unix:0", true, 5000, 16, still_active).ok());

  // A batch that ended frees its place.
  active.erase(1);
  auto after_end = limits.ReserveBatch("token:ci", false, 1, 1, still_active);
  REQUIRE(after_end.ok());
  // While a ticket is held (a submit in progress), it counts.
  CHECK(limits.ReserveBatch("token:ci", false, 1, 1, still_active).status().code() == StatusCode::kResourceExhausted);
  // An idempotent resubmit names a batch counted already: the client holds batch 2 alone.
  after_end->Submitted(2);
  auto one_more = limits.ReserveBatch("token:ci", false, 1, 1, still_active);
  REQUIRE(one_more.ok());
  one_more->Submitted(3);
  active.insert(3);
  // While the submit's ticket lives on, its batch counts once, not as a reservation too.
  auto refused = limits.ReserveBatch("token:ci", false, 1, 1, still_active);
  CHECK(refused.status().code() == StatusCode::kResourceExhausted);
  CHECK_THAT(refused.status().message(), Catch::Contains("already has 2 batches"));
}

TEST_CASE("client limits: calls in progress per client and for all non-admins together, a quarter kept for admins") {
  ClientLimitsConfig config = Small();
  config.server_threads = 8;  // 2 kept for admins, 6 shared
  config.calls_per_client = 4;
  ClientLimits limits(config);
  CHECK(limits.ThreadsKeptForAdmins() == 2);
  std::vector<ClientLimits::CallSlot> held;
  for (int i = 0; i < 4; ++i) {
    auto slot = limits.EnterCall("unix:1000", false);
    REQUIRE(slot.ok());
    held.push_back(std::move(*slot));
  }
  Result<ClientLimits::CallSlot> fifth = limits.EnterCall("unix:1000", false);
  REQUIRE(fifth.status().code() == StatusCode::kResourceExhausted);
  CHECK(fifth.status().message() ==
        "unix:1000 already has 4 calls in progress, the limit per client (limits.calls_per_client in temperd.yaml); "
        "finish reading one and retry");
  // Another member takes the remaining two shared threads, then no more.
  for (int i = 0; i < 2; ++i) {
    auto slot = limits.EnterCall("unix:1001", false);
    REQUIRE(slot.ok());
    held.push_back(std::move(*slot));
  }
  Result<ClientLimits::CallSlot> full = limits.EnterCall("unix:1002", false);
  REQUIRE(full.status().code() == StatusCode::kResourceExhausted);
  CHECK(full.status().message().find("hold all 6 of its call threads that are not kept for admins") !=
        std::string::npos);
  // Root is never counted, so it always finds the threads kept for it.
  for (int i = 0; i < 20; ++i) CHECK(limits.EnterCall("unix:0", true).ok());
  // A finished call gives its slot back.
  held.pop_back();
  CHECK(limits.EnterCall("unix:1002", false).ok());
}

}  // namespace
}  // namespace temper
