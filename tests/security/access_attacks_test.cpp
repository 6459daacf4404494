// Who may do what (issue 46): every call of temper.v1.Temper is allowed by role (viewer, operator,
// admin), the role comes from the kernel's peer credentials on the unix socket or from a token or a
// client certificate on TCP, and an operator acts only on its targets. The attacks run the real
// temperd and the real `temper` CLI as another user over the real socket, and gRPC over real TLS.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <google/protobuf/descriptor.h>
#include <grpcpp/grpcpp.h>
#include <catch2/catch.hpp>

#include "orchestrator/config/daemon_config.h"
#include "orchestrator/daemon_process.h"
#include "orchestrator/server/authorization.h"
#include "orchestrator/server/peer_access.h"
#include "skip.h"

namespace temper::testing {
namespace {

// nobody (65534) in nogroup (65534): on every Debian system.
constexpr int kNobody = 65534;
constexpr int kNogroup = 65534;

std::string ReadFileOrEmpty(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// `temper` run by nobody:nogroup against `daemon`.
struct Member {
  std::string client;
  const DaemonProcess& daemon;
  ProcessResult operator()(std::vector<std::string> args) const {
    args.insert(args.begin(), {client, "--socket", daemon.socket_path()});
    return RunProcess(args, kNobody, kNogroup);
  }
};

ProcessResult AsRoot(const DaemonProcess& daemon, std::vector<std::string> args) {
  args.insert(args.begin(), {TemperBinary(), "--socket", daemon.socket_path()});
  return RunProcess(args);
}

// The batch id `temper submit` printed ("batch 3 queued ..." → "3").
std::string SubmittedId(const ProcessResult& submit) {
  const size_t at = submit.out.find("batch ");
  if (at == std::string::npos) return "";
  const size_t end = submit.out.find_first_not_of("0123456789", at + 6);
  return submit.out.substr(at + 6, end - at - 6);
}

const std::vector<std::string> kSubmitLab = {"submit", "-t", "lab",           "-d", "ssg-test-ds.xml", "-p",
                                             "stig",   "-r", "accounts_tmout"};

TEST_CASE("every call of temper.v1.Temper has one access rule, and none is left open") {
  const google::protobuf::ServiceDescriptor* service =
      google::protobuf::DescriptorPool::generated_pool()->FindServiceByName("temper.v1.Temper");
  REQUIRE(service != nullptr);
  std::set<std::string> in_proto, in_table;
  for (int i = 0; i < service->method_count(); ++i) in_proto.insert(service->method(i)->name());
  for (const RpcAccess& rule : RpcAccessTable()) CHECK(in_table.insert(std::string(rule.method)).second);
  CHECK(in_proto == in_table);
  // A method the table does not know is refused, whoever calls.
  ClientIdentity root{.key = "unix:0", .name = "root (uid 0)", .role = ClientRole::kAdmin, .targets = {}};
  CHECK(Authorize(root, "DropEverything").error_code() == grpc::StatusCode::PERMISSION_DENIED);
  // A call with no stamped caller is refused, even for a viewer's call.
  CHECK(Authorize(ClientIdentity{}, "ListBatches").error_code() == grpc::StatusCode::PERMISSION_DENIED);
  // Changing SSH trust is an admin's; an operator's target list binds it.
  ClientIdentity op{.key = "unix:1000", .name = "alice (uid 1000)", .role = ClientRole::kOperator, .targets = {"lab"}};
  grpc::Status accept = Authorize(op, "AcceptHostKey");
  CHECK(accept.error_code() == grpc::StatusCode::PERMISSION_DENIED);
  CHECK(accept.error_message() ==
        "alice (uid 1000) is an operator and may not call AcceptHostKey: that needs the admin role (temperd.yaml "
        "`access:`)");
  CHECK(AuthorizeOnTarget(op, "SubmitBatch", "lab").ok());
  CHECK(AuthorizeOnTarget(op, "SubmitBatch", "prod").error_message() ==
        "alice (uid 1000) may not call SubmitBatch on target prod: its grant in temperd.yaml `access:` lists lab");
}

TEST_CASE("a peer's role: root and grants first, the socket's group as operator, anyone else refused") {
  std::vector<AccessGrant> grants = {
      {.unix_user = "65534", .role = ClientRole::kViewer, .where = "t:1:1"},
      {.unix_group = "50", .role = ClientRole::kOperator, .targets = {"web"}, .where = "t:2:1"},
      {.unix_group = "51", .role = ClientRole::kOperator, .targets = {"db"}, .where = "t:3:1"},
      {.unix_group = "52", .role = ClientRole::kAdmin, .where = "t:4:1"},
  };
  Result<PeerAccess> access = PeerAccess::Create("nogroup", grants);
  REQUIRE(access.ok());
  auto role_of = [&](uid_t uid, gid_t gid, std::vector<gid_t> groups = {}) {
    return access->Identify(PeerCredentials{.pid = 1, .uid = uid, .gid = gid, .groups = std::move(groups)});
  };
  CHECK(role_of(0, 0)->role == ClientRole::kAdmin);
  // nobody is in nogroup, but its own grant (viewer) decides, not the group's default.
  CHECK(role_of(65534, 65534)->role == ClientRole::kViewer);
  // Another member of the socket's group is an operator on every target.
  Result<ClientIdentity> member = role_of(1234, 65534);
  CHECK(member->role == ClientRole::kOperator);
  CHECK(member->targets.empty());
  CHECK(member->key == "unix:1234");
  // Two operator grants: both lists.
  CHECK(role_of(1000, 1000, {50, 51})->targets == std::vector<std::string>{"db", "web"});
  // The highest role wins, and an admin has no list.
  Result<ClientIdentity> admin = role_of(1000, 1000, {50, 52});
  CHECK(admin->role == ClientRole::kAdmin);
  CHECK(admin->targets.empty());
  Result<ClientIdentity> stranger = role_of(1000, 1000, {7});
  REQUIRE(stranger.status().code() == StatusCode::kPermissionDenied);
  CHECK(stranger.status().message().find("temperd accepts only root, its own user, members of group 'nogroup' and "
                                         "the users and groups of temperd.yaml's access list") != std::string::npos);
}

TEST_CASE("access: entries that name no client, two, an unknown role or misplaced targets are refused where they are") {
  auto error = [](const std::string& access) {
    return ParseDaemonConfig("access:\n" + access, "temperd.yaml").status().message();
  };
  CHECK(error("  - role: admin\n") ==
        "temperd.yaml:2:5: access[0]: each access entry names exactly one client: unix_user, unix_group, token_file "
        "(with name) or tls_client");
  CHECK(error("  - {unix_user: alice, unix_group: staff, role: viewer}\n").find("exactly one client") !=
        std::string::npos);
  CHECK(error("  - {unix_user: alice, role: root}\n").find("unknown role 'root' (expected: viewer, operator, admin)") !=
        std::string::npos);
  CHECK(
      error("  - {unix_user: alice, role: viewer, targets: [lab]}\n").find("only an operator's grant lists targets") !=
      std::string::npos);
  CHECK(error("  - {token_file: /etc/t, role: viewer}\n").find("a token_file entry needs a name") != std::string::npos);
  CHECK(error("  - {token_file: /etc/a, name: ci, role: viewer}\n  - {token_file: /etc/b, name: ci, role: admin}\n")
            .find("a second token named 'ci'") != std::string::npos);
}

TEST_CASE("a member of the socket's group cannot rewrite root's SSH trust, nor probe hosts through temperd") {
  if (geteuid() != 0) TEMPER_SKIP("needs root to run clients as other users");
  TempDir dir;
  const std::string client = CopyForOtherUsers(dir, TemperBinary());
  DaemonProcess daemon(dir, {.unix_group = "nogroup"});
  REQUIRE(daemon.Start().ok());
  chmod((dir / "run").c_str(), 0755);
  const Member member{client, daemon};
  const std::string known_hosts = dir / "state/ssh/known_hosts";
  const std::string before = ReadFileOrEmpty(known_hosts);

  // The impostor's key, and a probe of an arbitrary port from the daemon: both refused as calls,
  // before temperd connects anywhere.
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"hosts", "accept", "admin@127.0.0.1:9", "--fingerprint",
                                 "SHA256:uKf1QV8GHG3mR8bBOj8oL3Kk5YhzyC8kQK0F3d1pXpY"},
        std::vector<std::string>{"hosts", "accept", "admin@127.0.0.1:9"},
        std::vector<std::string>{"hosts", "clear", "lab"}}) {
    ProcessResult r = member(args);
    INFO(args[1] + " → " + r.err);
    CHECK(r.exit_code != 0);
    CHECK(r.err.find("(uid 65534) is an operator and may not call") != std::string::npos);
    CHECK(r.err.find("that needs the admin role") != std::string::npos);
  }
  CHECK(ReadFileOrEmpty(known_hosts) == before);
  CHECK(daemon.Log().find("127.0.0.1:9") == std::string::npos);  // temperd never tried to reach it

  // A waiver accepts a risk on the host: an admin's call, not an operator's.
  std::vector<std::string> waived = kSubmitLab;
  waived.insert(waived.end(), {"--waive", "accounts_tmout:accepted by the attacker:mallory"});
  ProcessResult waiver = member(waived);
  CHECK(waiver.exit_code != 0);
  CHECK(waiver.err.find("is an operator and may not waive rules") != std::string::npos);
  CHECK(AsRoot(daemon, waived).exit_code == 0);

  // What an operator may do, it still does.
  ProcessResult submitted = member(kSubmitLab);
  INFO(submitted.err);
  CHECK(submitted.exit_code == 0);
  CHECK(member({"list"}).exit_code == 0);
  // Root still may: the refusal is the role's, not the call's (the probe fails on the closed port).
  ProcessResult root = AsRoot(daemon, {"hosts", "accept", "admin@127.0.0.1:9"});
  CHECK(root.err.find("admin role") == std::string::npos);
  CHECK(daemon.Stop() == 0);
}

TEST_CASE("a fresh connection's first calls, made at once, all know their caller") {
  // gRPC shares one auth context among a connection's calls and stamps it from each call's
  // processor: concurrent first calls must neither lose the caller nor race on the context.
  TempDir dir;
  DaemonProcess daemon(dir);
  REQUIRE(daemon.Start().ok());
  for (int round = 0; round < 5; ++round) {
    auto stub = daemon.Stub();  // a new channel: a new connection
    std::vector<std::thread> calls;
    std::atomic<int> ok{0};
    for (int i = 0; i < 16; ++i) {
      calls.emplace_back([&] {
        temper::v1::ListBatchesResponse list;
        if (stub->ListBatches(CallContext().get(), {}, &list).ok()) ++ok;
      });
    }
    for (std::thread& t : calls) t.join();
    CHECK(ok == 16);
  }
  CHECK(daemon.Stop() == 0);
}

TEST_CASE("a viewer reads batches and the journal, and can neither submit nor cancel") {
  if (geteuid() != 0) TEMPER_SKIP("needs root to run clients as other users");
  TempDir dir;
  const std::string client = CopyForOtherUsers(dir, TemperBinary());
  DaemonProcess daemon(dir,
                       {.unix_group = "nogroup", .extra_yaml = "access:\n  - {unix_user: nobody, role: viewer}\n"});
  REQUIRE(daemon.Start().ok());
  chmod((dir / "run").c_str(), 0755);
  const Member viewer{client, daemon};

  ProcessResult mine = AsRoot(daemon, kSubmitLab);
  REQUIRE(mine.exit_code == 0);
  const std::string id = SubmittedId(mine);
  REQUIRE_FALSE(id.empty());

  CHECK(viewer({"list"}).exit_code == 0);
  CHECK(viewer({"status", id}).exit_code == 0);
  CHECK(viewer({"watch", id, "--no-follow"}).err.find("may not call") == std::string::npos);
  ProcessResult submit = viewer(kSubmitLab);
  CHECK(submit.exit_code != 0);
  CHECK(submit.err.find("nobody (uid 65534) is a viewer and may not call SubmitBatch: that needs the operator role") !=
        std::string::npos);
  ProcessResult cancel = viewer({"cancel", id});
  CHECK(cancel.exit_code != 0);
  CHECK(cancel.err.find("is a viewer and may not call CancelBatch") != std::string::npos);
  // Root's batch is untouched.
  ProcessResult status = AsRoot(daemon, {"status", id});
  INFO(status.out);
  CHECK(status.out.find("state       queued") != std::string::npos);
  CHECK(daemon.Stop() == 0);
}

TEST_CASE("an operator submits and cancels only on the targets its grant lists") {
  if (geteuid() != 0) TEMPER_SKIP("needs root to run clients as other users");
  TempDir dir;
  const std::string client = CopyForOtherUsers(dir, TemperBinary());
  std::filesystem::create_directories(dir / "roots/other");
  DaemonProcess daemon(dir, {.unix_group = "nogroup",
                             .more_targets = {{"other", dir / "roots/other"}},
                             .extra_yaml = "access:\n  - {unix_group: nogroup, role: operator, targets: [other]}\n"});
  REQUIRE(daemon.Start().ok());
  chmod((dir / "run").c_str(), 0755);
  const Member op{client, daemon};

  ProcessResult lab = op(kSubmitLab);
  CHECK(lab.exit_code != 0);
  CHECK(lab.err.find("nobody (uid 65534) may not call SubmitBatch on target lab: its grant in temperd.yaml "
                     "`access:` lists other") != std::string::npos);
  std::vector<std::string> submit_other = kSubmitLab;
  submit_other[2] = "other";
  ProcessResult other = op(submit_other);
  INFO(other.err);
  CHECK(other.exit_code == 0);

  ProcessResult roots = AsRoot(daemon, kSubmitLab);
  REQUIRE(roots.exit_code == 0);
  ProcessResult cancel = op({"cancel", SubmittedId(roots)});
  CHECK(cancel.exit_code != 0);
  CHECK(cancel.err.find("may not call CancelBatch on target lab") != std::string::npos);
  CHECK(op({"cancel", SubmittedId(other)}).exit_code == 0);
  CHECK(daemon.Stop() == 0);
}

// Makes a CA, a server certificate for localhost and client certificates it signs, with openssl.
struct Pki {
  const TempDir& dir;
  void Run(const std::vector<std::string>& argv) const {
    ProcessResult r = RunProcess(argv);
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
  }
  void Ca(const std::string& name) const {
    Run({"/usr/bin/openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
         "-days", "2", "-subj", "/CN=" + name, "-keyout", dir / (name + ".key"), "-out", dir / (name + ".pem")});
  }
  // A certificate for `cn` signed by `ca`, with `san` as its subjectAltName when given.
  void Signed(const std::string& cn, const std::string& ca, const std::string& san = "") const {
    Run({"/usr/bin/openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-subj",
         "/CN=" + cn, "-keyout", dir / (cn + ".key"), "-out", dir / (cn + ".csr")});
    std::vector<std::string> sign = {"/usr/bin/openssl",
                                     "x509",
                                     "-req",
                                     "-in",
                                     dir / (cn + ".csr"),
                                     "-CA",
                                     dir / (ca + ".pem"),
                                     "-CAkey",
                                     dir / (ca + ".key"),
                                     "-CAcreateserial",
                                     "-days",
                                     "2",
                                     "-out",
                                     dir / (cn + ".pem")};
    if (!san.empty()) {
      const std::string ext = dir.Write(cn + ".ext", "subjectAltName=" + san + "\n");
      sign.insert(sign.end(), {"-extfile", ext});
    }
    Run(sign);
  }
};

grpc::Status ListOver(const std::string& target, std::shared_ptr<grpc::ChannelCredentials> creds) {
  auto stub = temper::v1::Temper::NewStub(grpc::CreateChannel(target, creds));
  temper::v1::ListBatchesResponse list;
  return stub->ListBatches(CallContext().get(), {}, &list);
}

grpc::Status SubmitOver(const std::string& target, std::shared_ptr<grpc::ChannelCredentials> creds) {
  auto stub = temper::v1::Temper::NewStub(grpc::CreateChannel(target, creds));
  temper::v1::Batch batch;
  return stub->SubmitBatch(CallContext().get(), ValidSubmit(), &batch);
}

TEST_CASE("TCP: each bearer token is a client with its own role") {
  TempDir dir;
  Pki pki{dir};
  pki.Ca("ca");
  pki.Signed("localhost", "ca", "DNS:localhost");
  for (const char* name : {"reader.token", "ci.token"}) {
    chmod(dir.Write(name, std::string(name) + "-secret\n").c_str(), 0600);
  }
  const int port = FreeLoopbackPort();
  DaemonProcess daemon(
      dir, {.tcp_yaml = fmt::format("address: 127.0.0.1:{}\ntls_cert: localhost.pem\ntls_key: localhost.key", port),
            .extra_yaml = "access:\n  - {name: reader, token_file: reader.token, role: viewer}\n"
                          "  - {name: ci, token_file: ci.token, role: operator}\n"});
  REQUIRE(daemon.Start().ok());
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = ReadFileOrEmpty(dir / "ca.pem");
  const std::string target = fmt::format("localhost:{}", port);
  auto with_token = [&](const std::string& token) {
    return grpc::CompositeChannelCredentials(grpc::SslCredentials(ssl), grpc::AccessTokenCredentials(token));
  };
  CHECK(ListOver(target, with_token("reader.token-secret")).ok());
  grpc::Status reader_submit = SubmitOver(target, with_token("reader.token-secret"));
  CHECK(reader_submit.error_code() == grpc::StatusCode::PERMISSION_DENIED);
  CHECK(reader_submit.error_message() ==
        "token 'reader' is a viewer and may not call SubmitBatch: that needs the operator role (temperd.yaml "
        "`access:`)");
  CHECK(SubmitOver(target, with_token("ci.token-secret")).ok());
  CHECK(SubmitOver(target, with_token("guess")).error_code() == grpc::StatusCode::UNAUTHENTICATED);
  // One connection speaks for one client: a second token over it is refused, not added.
  {
    auto stub = temper::v1::Temper::NewStub(grpc::CreateChannel(target, grpc::SslCredentials(ssl)));
    temper::v1::ListBatchesResponse list;
    auto as = [](const std::string& token) {
      std::unique_ptr<grpc::ClientContext> context = CallContext();
      context->set_credentials(grpc::AccessTokenCredentials(token));
      return context;
    };
    CHECK(stub->ListBatches(as("reader.token-secret").get(), {}, &list).ok());
    temper::v1::Batch batch;
    grpc::Status switched = stub->SubmitBatch(as("ci.token-secret").get(), ValidSubmit(), &batch);
    CHECK(switched.error_code() == grpc::StatusCode::UNAUTHENTICATED);
    CHECK(switched.error_message() ==
          "this connection already speaks for another client; open a new one for token 'ci'");
    CHECK(stub->ListBatches(as("reader.token-secret").get(), {}, &list).ok());
  }
  // Without a token or a client certificate, nobody.
  CHECK(ListOver(target, grpc::SslCredentials(ssl)).error_code() == grpc::StatusCode::UNAUTHENTICATED);
  CHECK(daemon.Stop() == 0);
}

TEST_CASE("TCP with client_ca: a verified client certificate names the client, and no other gets in") {
  TempDir dir;
  Pki pki{dir};
  pki.Ca("ca");
  pki.Ca("rogue-ca");
  pki.Signed("localhost", "ca", "DNS:localhost");
  pki.Signed("robot", "ca");
  pki.Signed("stranger", "ca");
  pki.Signed("forger", "rogue-ca", "DNS:robot");  // claims robot's name, signed by the wrong CA
  const int port = FreeLoopbackPort();
  DaemonProcess daemon(dir, {.tcp_yaml = fmt::format("address: 127.0.0.1:{}\ntls_cert: localhost.pem\ntls_key: "
                                                     "localhost.key\nclient_ca: ca.pem",
                                                     port),
                             .extra_yaml = "access:\n  - {tls_client: robot, role: viewer}\n"});
  REQUIRE(daemon.Start().ok());
  const std::string target = fmt::format("localhost:{}", port);
  auto as = [&](const std::string& who) {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = ReadFileOrEmpty(dir / "ca.pem");
    if (!who.empty()) {
      ssl.pem_private_key = ReadFileOrEmpty(dir / (who + ".key"));
      ssl.pem_cert_chain = ReadFileOrEmpty(dir / (who + ".pem"));
    }
    return grpc::SslCredentials(ssl);
  };
  CHECK(ListOver(target, as("robot")).ok());
  grpc::Status robot_submit = SubmitOver(target, as("robot"));
  CHECK(robot_submit.error_code() == grpc::StatusCode::PERMISSION_DENIED);
  CHECK(robot_submit.error_message().find("TLS client robot is a viewer") != std::string::npos);
  // Signed by the CA but named by no grant.
  CHECK(ListOver(target, as("stranger")).error_code() == grpc::StatusCode::UNAUTHENTICATED);
  // The right name from the wrong CA, and no certificate at all: TLS refuses the handshake.
  CHECK_FALSE(ListOver(target, as("forger")).ok());
  CHECK_FALSE(ListOver(target, as("")).ok());
  CHECK(daemon.Stop() == 0);
}

TEST_CASE("clients that stop reading their reports cannot take the call threads root's calls need") {
  // Each report stream a client leaves unread holds one of the sync server's threads while temperd
  // waits to write; held by several clients at once they once left root's own calls none.
  TempDir dir;
  Pki pki{dir};
  pki.Ca("ca");
  pki.Signed("localhost", "ca", "DNS:localhost");
  // A datastream with many rules, so one batch's report is far larger than a stream's flow-control
  // window: the server's write waits for a client that never reads.
  constexpr int kRules = 5000;
  std::filesystem::create_directories(dir / "big");
  std::string ds = R"(<?xml version="1.0" encoding="UTF-8"?>
<ds:data-stream-collection xmlns:ds="http://scap.nist.gov/schema/scap/source/1.2" id="scap_big_collection">
  <ds:component id="scap_big_comp_xccdf">
    <xccdf:Benchmark xmlns:xccdf="http://checklists.nist.gov/xccdf/1.2" id="xccdf_org.ssgproject.content_benchmark_BIG">
      <xccdf:Profile id="xccdf_org.ssgproject.content_profile_stig"/>
)";
  temper::v1::SubmitBatchRequest big;
  big.set_target("lab");
  big.set_datastream("ssg-big-ds.xml");
  big.set_profile("stig");
  for (int i = 0; i < kRules; ++i) {
    const std::string rule = fmt::format("rule_number_{:05}_with_a_long_enough_name", i);
    ds += fmt::format("      <xccdf:Rule id=\"xccdf_org.ssgproject.content_rule_{}\"/>\n", rule);
    big.add_rule_ids(rule);
  }
  ds += "    </xccdf:Benchmark>\n  </ds:component>\n</ds:data-stream-collection>\n";
  dir.Write("big/ssg-big-ds.xml", ds);
  std::string access = "access:\n";
  for (int i = 0; i < 4; ++i) {
    chmod(dir.Write(fmt::format("m{}.token", i), fmt::format("member-{}-secret\n", i)).c_str(), 0600);
    access += fmt::format("  - {{name: m{0}, token_file: m{0}.token, role: operator}}\n", i);
  }
  const int port = FreeLoopbackPort();
  DaemonProcess daemon(
      dir, {.tcp_yaml = fmt::format("address: 127.0.0.1:{}\ntls_cert: localhost.pem\ntls_key: localhost.key", port),
            .content_dirs = {dir / "big"},
            .extra_yaml = access + "limits:\n  server_threads: 8\n  calls_per_client: 2\n"});
  REQUIRE(daemon.Start().ok());
  temper::v1::Batch batch;
  grpc::Status submitted = daemon.Stub()->SubmitBatch(CallContext(60).get(), big, &batch);
  INFO(submitted.error_message());
  REQUIRE(submitted.ok());

  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = ReadFileOrEmpty(dir / "ca.pem");
  const std::string target = fmt::format("localhost:{}", port);
  // An attacker keeps its receive window small, so temperd's writes wait for it soon.
  grpc::ChannelArguments small_window;
  small_window.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  small_window.SetInt(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, 1024);
  auto stub_of = [&](int member) {
    return temper::v1::Temper::NewStub(grpc::CreateCustomChannel(
        target,
        grpc::CompositeChannelCredentials(grpc::SslCredentials(ssl),
                                          grpc::AccessTokenCredentials(fmt::format("member-{}-secret", member))),
        small_window));
  };
  // Members 0, 1 and 2 each start two report streams and never read them: six threads held.
  grpc::CompletionQueue queue;
  struct Unread {
    std::unique_ptr<temper::v1::Temper::Stub> stub;
    grpc::ClientContext context;
    std::unique_ptr<grpc::ClientAsyncReader<temper::v1::BatchReportChunk>> reader;
  };
  std::vector<std::unique_ptr<Unread>> unread;
  temper::v1::GetBatchReportRequest report;
  report.set_batch_id(batch.id());
  for (int member = 0; member < 3; ++member) {
    for (int i = 0; i < 2; ++i) {
      auto u = std::make_unique<Unread>();
      u->stub = stub_of(member);
      u->reader = u->stub->AsyncGetBatchReport(&u->context, report, &queue, u.get());
      unread.push_back(std::move(u));
    }
  }
  // Each stream is started (its tag comes back) and then left unread.
  for (size_t i = 0; i < unread.size(); ++i) {
    void* tag = nullptr;
    bool ok = false;
    REQUIRE(queue.AsyncNext(&tag, &ok, std::chrono::system_clock::now() + std::chrono::seconds(30)) ==
            grpc::CompletionQueue::GOT_EVENT);
  }
  // Give temperd time to reach the writes that wait for the readers.
  std::this_thread::sleep_for(std::chrono::seconds(2));

  temper::v1::ListBatchesResponse list;
  grpc::Status third = stub_of(0)->ListBatches(CallContext().get(), {}, &list);
  CHECK(third.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED);
  CHECK(third.error_message() ==
        "token:m0 already has 2 calls in progress, the limit per client (limits.calls_per_client in temperd.yaml); "
        "finish reading one and retry");
  grpc::Status fourth_member = stub_of(3)->ListBatches(CallContext().get(), {}, &list);
  CHECK(fourth_member.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED);
  CHECK(fourth_member.error_message().find("hold all 6 of its call threads that are not kept for admins") !=
        std::string::npos);
  // Root's calls find the threads kept for admins.
  for (int i = 0; i < 3; ++i) {
    grpc::Status root = daemon.Stub()->ListBatches(CallContext().get(), {}, &list);
    INFO("root's call " << i << ": code " << root.error_code() << ": " << root.error_message());
    CHECK(root.ok());
  }

  for (auto& u : unread) u->context.TryCancel();
  CHECK(daemon.Stop() == 0);
  queue.Shutdown();
  void* tag = nullptr;
  bool ok = false;
  while (queue.Next(&tag, &ok)) {
  }
}

}  // namespace
}  // namespace temper::testing
