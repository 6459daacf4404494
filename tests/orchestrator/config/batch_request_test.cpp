#include "orchestrator/config/batch_request.h"

#include <fmt/format.h>
#include <catch2/catch.hpp>

#include "orchestrator/temp_dir.h"

namespace temper {
namespace {

using testing::TempDir;

struct Fixture {
  TempDir dir;
  DaemonConfig config;
  // What the datastream defines; the validator reads it through the context.
  std::shared_ptr<stig::DatastreamIds> ids = std::make_shared<stig::DatastreamIds>();
  Fixture() {
    config.source = "/etc/temper/temperd.yaml";
    config.content_dirs = {dir.path()};
    dir.Write("ssg-test-ds.xml", "<xml/>");
    config.targets.push_back(TargetConfig{.name = "lab", .type = "rootfs", .path = "/r"});
    ids->profiles = {"xccdf_org.ssgproject.content_profile_stig", "xccdf_org.ssgproject.content_profile_cis_level1"};
    ids->rules = {"xccdf_org.ssgproject.content_rule_sshd_disable_root_login",
                  "xccdf_org.ssgproject.content_rule_accounts_tmout"};
  }
  // A caller who may do everything; `host_targets`: the SSH hosts known so far.
  SubmitContext Context(std::vector<std::string> host_targets = {}) const {
    SubmitContext context{.config = config, .host_targets = std::move(host_targets)};
    context.admit_host = [](const std::string&) { return Status::OK(); };
    context.target_for_host = [](const std::string& host) { return "ssh:" + host; };
    context.authorize_target = [](const std::string&) { return Status::OK(); };
    context.authorize_waivers = [] { return Status::OK(); };
    context.datastream_ids = [this](const std::string&) -> Result<std::shared_ptr<const stig::DatastreamIds>> {
      return std::shared_ptr<const stig::DatastreamIds>(ids);
    };
    return context;
  }
  Result<NewBatch> Validate(const temper::v1::SubmitBatchRequest& r, std::vector<std::string> host_targets = {}) const {
    return ValidateSubmit(DecodeSubmitRequest(r), Context(std::move(host_targets)));
  }
  temper::v1::SubmitBatchRequest Valid() const {
    temper::v1::SubmitBatchRequest r;
    r.set_target("lab");
    r.set_datastream("ssg-test-ds.xml");
    r.set_profile("stig");
    r.add_rule_ids("sshd_disable_root_login");
    r.add_rule_ids("xccdf_org.ssgproject.content_rule_accounts_tmout");
    return r;
  }
  std::string Error(const temper::v1::SubmitBatchRequest& r) const {
    auto b = Validate(r);
    return b.ok() ? "OK" : b.status().message();
  }
};

TEST_CASE("a valid request expands short rule ids and fills default budgets") {
  Fixture f;
  auto batch = f.Validate(f.Valid());
  REQUIRE(batch.ok());
  CHECK(batch->datastream == f.dir / "ssg-test-ds.xml");
  CHECK(batch->rule_ids == std::vector<std::string>{"xccdf_org.ssgproject.content_rule_sshd_disable_root_login",
                                                    "xccdf_org.ssgproject.content_rule_accounts_tmout"});
  CHECK(batch->budgets.max_attempts == f.config.default_budgets.max_attempts);
}

TEST_CASE("requested budgets override defaults within range") {
  Fixture f;
  auto r = f.Valid();
  r.mutable_budgets()->set_max_attempts(7);
  r.mutable_budgets()->set_wall_time_seconds(60);
  auto batch = f.Validate(r);
  REQUIRE(batch.ok());
  CHECK(batch->budgets.max_attempts == 7);
  CHECK(batch->budgets.wall_time.count() == 60);
  CHECK(batch->budgets.max_tokens == f.config.default_budgets.max_tokens);
}

TEST_CASE("each invalid field is named") {
  Fixture f;
  auto r = f.Valid();
  r.set_target("lba");
  CHECK(f.Error(r) ==
        "target: 'lba' is not configured in /etc/temper/temperd.yaml (did you mean 'lab'?) (configured: lab)");
  r = f.Valid();
  r.set_datastream("ssg-tset-ds.xml");
  CHECK(f.Error(r) == "datastream 'ssg-tset-ds.xml' is in no content directory (content_dirs: " + f.dir.path() +
                          ") (did you mean 'ssg-test-ds.xml'?)");
  r = f.Valid();
  r.set_datastream("../etc/passwd");
  CHECK(f.Error(r) ==
        "datastream: '../etc/passwd' must be a file name in a content directory or an absolute path "
        "(content_dirs: " +
            f.dir.path() + ")");
  r = f.Valid();
  r.set_datastream("/etc/passwd");
  CHECK(f.Error(r) == "datastream /etc/passwd is not inside a content directory (content_dirs: " + f.dir.path() +
                          "): temperd loads datastreams only from there");
  r = f.Valid();
  r.set_profile("st ig");
  CHECK(f.Error(r) == "profile: 'st ig' is neither an XCCDF profile id nor a profile name such as 'stig'");
  r = f.Valid();
  r.add_rule_ids("rm -rf /");
  CHECK(
      f.Error(r) ==
      "rule_ids[2]: 'rm -rf /' is not a rule id: use letters, digits, '_', '.' and '-' (e.g. sshd_disable_root_login)");
  r = f.Valid();
  r.add_rule_ids("xccdf_org.ssgproject.content_profile_stig");
  CHECK(f.Error(r) ==
        "rule_ids[2]: 'xccdf_org.ssgproject.content_profile_stig' is not an XCCDF rule id (expected "
        "xccdf_<namespace>_rule_<name>)");
  r = f.Valid();
  r.add_rule_ids("sshd_disable_root_login");
  CHECK(f.Error(r) == "rule_ids[2]: 'sshd_disable_root_login' is listed twice");
  r = f.Valid();
  r.set_whole_profile(true);
  CHECK(f.Error(r) == "rule_ids: give either explicit rule ids or whole_profile, exactly one of the two");
  r = f.Valid();
  r.clear_rule_ids();
  CHECK(f.Error(r) == "rule_ids: give either explicit rule ids or whole_profile, exactly one of the two");
  r = f.Valid();
  r.mutable_budgets()->set_max_attempts(51);
  CHECK(f.Error(r) == "budgets.max_attempts: 51 is out of range [1, 50]");
  r = f.Valid();
  r.mutable_budgets()->set_wall_time_seconds(5);
  CHECK(f.Error(r) == "budgets.wall_time_seconds: 5 is out of range [10, 86400]");
  r = f.Valid();
  r.mutable_budgets()->set_max_tokens(10);
  CHECK(f.Error(r) == "budgets.max_tokens: 10 is out of range [1000, 100000000]");
  r = f.Valid();
  r.set_request_id("has space");
  CHECK(f.Error(r) == "request_id: only printable ASCII characters without spaces");
  r = f.Valid();
  r.clear_target();
  CHECK(f.Error(r) == "target: required");
}

TEST_CASE("parallel_attempts: temperd's unless the request sets it, 1 to 16, and never above 1 on an SSH host") {
  Fixture f;
  f.config.parallel_attempts = 4;
  f.config.targets.push_back(TargetConfig{.name = "web1", .type = "ssh", .host = "admin@web1"});
  auto r = f.Valid();
  CHECK(f.Validate(r)->options.parallel_attempts == 4);
  r.set_parallel_attempts(8);
  CHECK(f.Validate(r)->options.parallel_attempts == 8);
  r.set_parallel_attempts(1);
  CHECK(f.Validate(r)->options.parallel_attempts == 1);
  r.set_parallel_attempts(17);
  CHECK(f.Error(r) == "parallel_attempts: 17; 1 to 16 (0: temperd's loop.parallel_attempts, 4)");

  r.set_target("web1");
  r.set_parallel_attempts(2);
  CHECK(f.Error(r) ==
        "parallel_attempts: 2 for target 'web1', an SSH host: a host runs one attempt at a time (its running "
        "state cannot be forked)");
  r.set_parallel_attempts(1);
  CHECK(f.Error(r) == "OK");
  // A host named on submit is not in temperd.yaml's targets: an SSH host too.
  r.set_target("admin@web2");
  r.set_parallel_attempts(3);
  auto host = f.Validate(r, {"admin@web2"});
  REQUIRE_FALSE(host.ok());
  CHECK(host.status().message().find("parallel_attempts: 3 for target 'admin@web2', an SSH host") == 0);
}

TEST_CASE("parallel_attempts at auto: the fewest of the endpoint's max_seqs, the CPUs and the per-batch limit") {
  Fixture f;  // loop.parallel_attempts unset: auto
  f.config.targets.push_back(TargetConfig{.name = "web1", .type = "ssh", .host = "admin@web1"});
  auto r = f.Valid();
  auto sized = [&](std::optional<uint32_t> max_seqs, uint32_t cpus) {
    SubmitContext context = f.Context();
    context.worker_endpoint = {"remote", max_seqs};
    context.machine = MachineCpus{cpus, fmt::format("{} CPUs", cpus)};
    Result<NewBatch> batch = ValidateSubmit(DecodeSubmitRequest(r), context);
    REQUIRE(batch.ok());
    return batch->options.parallel_attempts;
  };
  CHECK(sized(8, 2) == 2);                                      // the machine
  CHECK(sized(2, 16) == 2);                                     // the endpoint
  CHECK(sized(std::nullopt, 16) == kDefaultEndpointSequences);  // an endpoint that does not say
  CHECK(sized(64, 64) == 4);                                    // limits.parallel_attempts_per_batch
  CHECK(sized(8, 1) == 1);
  f.config.limits.parallel_attempts_per_batch = 8;
  CHECK(sized(64, 64) == 8);
  // The request's own number overrides auto, within the limits checked elsewhere.
  r.set_parallel_attempts(3);
  CHECK(sized(8, 1) == 3);
  // An SSH host: auto is 1, silently; an explicit 2 is still refused.
  r.set_target("web1");
  r.set_parallel_attempts(0);
  CHECK(sized(8, 16) == 1);
  r.set_parallel_attempts(2);
  CHECK(f.Error(r).find("parallel_attempts: 2 for target 'web1', an SSH host") == 0);
  // Above 16, the message names auto as temperd's setting.
  r.set_target("lab");
  r.set_parallel_attempts(17);
  CHECK(f.Error(r) == "parallel_attempts: 17; 1 to 16 (0: temperd's loop.parallel_attempts, auto)");
}

TEST_CASE("why a batch runs N attempts at once reads auto's reasons, the configured number or the request") {
  const ParallelChoice sized = AutoParallelAttempts(true, {"remote", 8}, MachineCpus{2, "2 CPUs"}, 4);
  CHECK(sized.attempts == 2);
  CHECK(sized.why == "auto: 2 (machine: 2 CPUs; endpoint 'remote': max_seqs 8; limits.parallel_attempts_per_batch: 4)");
  CHECK(AutoParallelAttempts(true, {"local", std::nullopt}, MachineCpus{16, "16 CPUs"}, 16).why ==
        "auto: 4 (machine: 16 CPUs; endpoint 'local': max_seqs not stated, counted as 4; "
        "limits.parallel_attempts_per_batch: 16)");
  CHECK(ParallelAttemptsWhy(2, true, std::nullopt, sized) == sized.why);
  CHECK(ParallelAttemptsWhy(4, true, std::nullopt, sized) == "requested: 4 (" + sized.why + ")");
  CHECK(ParallelAttemptsWhy(3, true, 3u, sized) == "loop.parallel_attempts: 3");
  CHECK(ParallelAttemptsWhy(1, true, 3u, sized) == "requested: 1 (loop.parallel_attempts: 3)");
  CHECK(ParallelAttemptsWhy(4, false, 4u, sized) ==
        "1: the target cannot fork (an SSH host runs one attempt at a time)");
  const MachineCpus machine = CpusAvailable();
  CHECK(machine.count >= 1);
  CHECK(machine.source.find(fmt::format("{} CPUs", machine.count)) == 0);
}

TEST_CASE("a rule or profile the datastream lacks is refused, with the closest ids in the client's form") {
  Fixture f;
  auto check = [&](const temper::v1::SubmitBatchRequest& r) { return f.Error(r); };
  CHECK(check(f.Valid()) == "OK");
  auto r = f.Valid();
  r.set_rule_ids(1, "acounts_tmout");
  CHECK(check(r) == "rule_ids[1]: 'acounts_tmout' is not a rule of ssg-test-ds.xml (did you mean 'accounts_tmout'?)");
  r.set_rule_ids(1, "xccdf_org.ssgproject.content_rule_accounts_tmot");
  CHECK(check(r) ==
        "rule_ids[1]: 'xccdf_org.ssgproject.content_rule_accounts_tmot' is not a rule of ssg-test-ds.xml (did you "
        "mean 'xccdf_org.ssgproject.content_rule_accounts_tmout'?)");
  r = f.Valid();
  r.set_rule_ids(0, "no_such_rule_at_all");
  CHECK(check(r) == "rule_ids[0]: 'no_such_rule_at_all' is not a rule of ssg-test-ds.xml");

  r = f.Valid();
  r.set_profile("stgi");
  CHECK(check(r) == "profile: 'stgi' is not a profile of ssg-test-ds.xml (did you mean 'stig'?)");
  r.set_profile("xccdf_org.ssgproject.content_profile_cis_level1");
  CHECK(check(r) == "OK");
  r.set_profile("level1");  // a suffix, but not the name after "_profile_"
  CHECK(check(r).rfind("profile: 'level1' is not a profile of ssg-test-ds.xml", 0) == 0);
  r = f.Valid();
  r.clear_rule_ids();
  r.set_whole_profile(true);
  CHECK(check(r) == "OK");
}

TEST_CASE("waivers are normalized, checked field by field, and carried with the opt-ins") {
  Fixture f;
  auto r = f.Valid();
  temper::v1::Waiver* w = r.add_waivers();
  w->set_rule_id("accounts_tmout");
  w->set_reason("kiosk sessions must not time out");
  w->set_owner("secops@example.com");
  w->mutable_expires_at()->set_seconds(1900000000);
  r.set_allow_disruptive(true);
  r.set_plan_only(true);
  auto batch = f.Validate(r);
  REQUIRE(batch.ok());
  REQUIRE(batch->options.waivers.size() == 1);
  CHECK(batch->options.waivers[0].rule_id == "xccdf_org.ssgproject.content_rule_accounts_tmout");
  CHECK(batch->options.waivers[0].expires_at == int64_t{1900000000} * 1000);
  CHECK(batch->options.allow_disruptive);
  CHECK(batch->options.plan_only);

  auto bad = r;
  bad.mutable_waivers(0)->set_owner("");
  CHECK(f.Error(bad) == "waivers[0].owner: required (who accepted the risk)");
  bad = r;
  bad.mutable_waivers(0)->set_reason("");
  CHECK(f.Error(bad) == "waivers[0].reason: required (why the risk is accepted)");
  bad = r;
  *bad.add_waivers() = r.waivers(0);
  bad.mutable_waivers(1)->set_rule_id("xccdf_org.ssgproject.content_rule_accounts_tmout");
  CHECK(f.Error(bad) == "waivers[1].rule_id: 'xccdf_org.ssgproject.content_rule_accounts_tmout' is waived twice");
  bad = r;
  bad.mutable_waivers(0)->set_rule_id("no such rule!");
  CHECK(f.Error(bad).rfind("waivers[0].rule_id: 'no such rule!' is not a rule id", 0) == 0);
  bad = r;
  bad.mutable_waivers(0)->mutable_expires_at()->set_seconds(-5);
  CHECK(f.Error(bad) == "waivers[0].expires_at: not a valid time after 1970");
}

TEST_CASE("configured waivers join the batch's, which win for the same rule, others' rules are left out") {
  Fixture f;
  const std::string p = "xccdf_org.ssgproject.content_rule_";
  f.config.waivers = {{p + "accounts_tmout", "site: kiosks", "ops", std::nullopt},
                      {p + "sshd_disable_root_login", "site: console", "ops", int64_t{1} * 1000},
                      {p + "banner_etc_issue_net", "not in this batch", "ops", std::nullopt}};
  auto r = f.Valid();
  temper::v1::Waiver* w = r.add_waivers();
  w->set_rule_id("accounts_tmout");
  w->set_reason("batch: this kiosk");
  w->set_owner("alice");
  auto batch = f.Validate(r);
  REQUIRE(batch.ok());
  REQUIRE(batch->options.waivers.size() == 2);
  CHECK(batch->options.waivers[0].rule_id == p + "accounts_tmout");
  CHECK(batch->options.waivers[0].owner == "alice");  // the batch's, not the configured one
  CHECK(batch->options.waivers[1].rule_id == p + "sshd_disable_root_login");
  CHECK(batch->options.waivers[1].reason == "site: console");

  // A whole-profile batch may hold any rule: every configured waiver applies.
  auto whole = f.Valid();
  whole.clear_rule_ids();
  whole.set_whole_profile(true);
  auto profile_batch = f.Validate(whole);
  REQUIRE(profile_batch.ok());
  CHECK(profile_batch->options.waivers.size() == 3);
}

// The validator alone, one bad request of each kind: refused with the field (or rule) named first.
TEST_CASE("the SubmitBatch validator refuses each kind of bad request, naming the field") {
  Fixture f;
  using Change = std::function<void(temper::v1::SubmitBatchRequest&)>;
  auto waiver = [](temper::v1::SubmitBatchRequest& r) {
    temper::v1::Waiver* w = r.add_waivers();
    w->set_rule_id("accounts_tmout");
    w->set_reason("kiosk");
    w->set_owner("secops");
    return w;
  };
  const std::vector<std::pair<Change, std::string>> cases = {
      {[](auto& r) { r.set_name(std::string(201, 'n')); }, "name: 201 bytes; at most 200"},
      {[](auto& r) { r.set_host("admin@web2"); }, "host: give either target or host, not both"},
      {[](auto& r) {
         r.clear_target();
         r.set_host("admin@web2:notaport");
       },
       "host: "},
      {[](auto& r) { r.clear_target(); }, "target: required"},
      {[](auto& r) { r.set_target("prod"); }, "target: 'prod' is not configured in /etc/temper/temperd.yaml"},
      {[](auto& r) { r.clear_datastream(); }, "datastream: required"},
      {[](auto& r) { r.set_datastream("../../etc/passwd"); }, "datastream"},
      {[](auto& r) { r.set_datastream("ssg-other-ds.xml"); },
       "datastream 'ssg-other-ds.xml' is in no content directory"},
      {[](auto& r) { r.clear_profile(); }, "profile: required"},
      {[](auto& r) { r.set_profile("st ig"); }, "profile: 'st ig' is neither an XCCDF profile id nor a profile name"},
      {[](auto& r) { r.set_profile("stgi"); }, "profile: 'stgi' is not a profile of ssg-test-ds.xml"},
      {[](auto& r) { r.clear_rule_ids(); }, "rule_ids: give either explicit rule ids or whole_profile"},
      {[](auto& r) { r.set_whole_profile(true); }, "rule_ids: give either explicit rule ids or whole_profile"},
      {[](auto& r) {
         for (int i = 0; i < 5000; ++i) r.add_rule_ids(fmt::format("rule_{}", i));
       },
       "rule_ids: 5002 rules; a batch holds at most 5000"},
      {[](auto& r) { r.set_rule_ids(1, "no such rule!"); }, "rule_ids[1]: 'no such rule!' is not a rule id"},
      {[](auto& r) { r.set_rule_ids(1, "xccdf_bad"); }, "rule_ids[1]: 'xccdf_bad' is not an XCCDF rule id"},
      {[](auto& r) { r.set_rule_ids(1, "sshd_disable_root_login"); },
       "rule_ids[1]: 'sshd_disable_root_login' is listed twice"},
      {[](auto& r) { r.set_rule_ids(1, "acounts_tmout"); },
       "rule_ids[1]: 'acounts_tmout' is not a rule of ssg-test-ds.xml"},
      {[](auto& r) { r.mutable_budgets()->set_max_attempts(51); }, "budgets.max_attempts: 51 is out of range"},
      {[](auto& r) { r.mutable_budgets()->set_wall_time_seconds(5); }, "budgets.wall_time_seconds: 5 is out of range"},
      {[](auto& r) { r.mutable_budgets()->set_max_tokens(10); }, "budgets.max_tokens: 10 is out of range"},
      {[](auto& r) { r.set_request_id("a b"); }, "request_id: only printable ASCII characters without spaces"},
      {[&](auto& r) { waiver(r)->set_rule_id("bad id!"); }, "waivers[0].rule_id: 'bad id!' is not a rule id"},
      {[&](auto& r) { waiver(r)->clear_reason(); }, "waivers[0].reason: required"},
      {[&](auto& r) { waiver(r)->clear_owner(); }, "waivers[0].owner: required"},
      {[&](auto& r) { waiver(r)->mutable_expires_at()->set_nanos(-1); }, "waivers[0].expires_at: not a valid time"},
      {[&](auto& r) {
         waiver(r);
         waiver(r);
       },
       "waivers[1].rule_id: 'accounts_tmout' is waived twice"},
      {[&](auto& r) {
         for (int i = 0; i < 200; ++i) {
           temper::v1::Waiver* w = waiver(r);
           w->set_rule_id(fmt::format("rule_{}", i));
           w->set_reason(std::string(2000, 'x'));
         }
       },
       "waivers: 200 waivers of "},
      {[](auto& r) { r.set_parallel_attempts(17); }, "parallel_attempts: 17; 1 to 16"},
  };
  for (const auto& [change, expected] : cases) {
    temper::v1::SubmitBatchRequest r = f.Valid();
    change(r);
    INFO(r.ShortDebugString().substr(0, 300));
    CHECK_THAT(f.Error(r), Catch::StartsWith(expected));
  }

  // The caller's rights and the host registry, from the context, in the order the server asked.
  temper::v1::SubmitBatchRequest r = f.Valid();
  SubmitContext refusing = f.Context();
  refusing.authorize_target = [](const std::string& target) {
    return Status::PermissionDenied("alice may not call SubmitBatch on target " + target);
  };
  Result<NewBatch> denied = ValidateSubmit(DecodeSubmitRequest(r), refusing);
  CHECK(denied.status().code() == StatusCode::kPermissionDenied);
  CHECK(denied.status().message() == "alice may not call SubmitBatch on target lab");
  SubmitContext no_waivers = f.Context();
  no_waivers.authorize_waivers = [] { return Status::PermissionDenied("alice may not waive rules"); };
  CHECK(ValidateSubmit(DecodeSubmitRequest(r), no_waivers).ok());  // no waiver asked for
  waiver(r);
  CHECK(ValidateSubmit(DecodeSubmitRequest(r), no_waivers).status().message() == "alice may not waive rules");
  r = f.Valid();
  r.clear_target();
  r.set_host("admin@web2");
  SubmitContext unknown_host = f.Context();
  unknown_host.admit_host = [](const std::string& host) {
    return Status::PermissionDenied("host: " + host + " unknown");
  };
  CHECK(ValidateSubmit(DecodeSubmitRequest(r), unknown_host).status().message() == "host: admin@web2 unknown");
  // Admitted, the host's target name is the batch's target (an SSH host: one attempt at a time).
  Result<NewBatch> on_host = f.Validate(r);
  REQUIRE(on_host.ok());
  CHECK(on_host->target == "ssh:admin@web2");
  r.set_parallel_attempts(2);
  CHECK_THAT(f.Error(r), Catch::StartsWith("parallel_attempts: 2 for target 'ssh:admin@web2', an SSH host"));
  // A datastream whose ids cannot be read is refused naming it.
  SubmitContext unreadable = f.Context();
  unreadable.datastream_ids = [](const std::string&) -> Result<std::shared_ptr<const stig::DatastreamIds>> {
    return Status::DataLoss("not XML");
  };
  CHECK(ValidateSubmit(DecodeSubmitRequest(f.Valid()), unreadable).status().message() == "datastream: not XML");
}

TEST_CASE("batch ids are positive decimal numbers") {
  CHECK(*ParseBatchId("17") == 17);
  CHECK(ParseBatchId("0").status().message() == "'0' is not a batch id (batch ids are positive numbers)");
  CHECK_FALSE(ParseBatchId("17x").ok());
  CHECK_FALSE(ParseBatchId("").ok());
  CHECK_FALSE(ParseBatchId("-3").ok());
}

}  // namespace
}  // namespace temper
