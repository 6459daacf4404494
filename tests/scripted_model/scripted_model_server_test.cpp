// The scripted model server driven by the real roles: prompts built by Architect, Worker and
// Reflector for rules with real SCAP Security Guide fix texts, sent by the real OpenAIClient over
// HTTP (whole and SSE), answers parsed by the roles' own parsers, and the Worker's tool loop run
// against a target double that records what it was asked to do. Checks that each role's answer
// follows the script (fix, wrong first, regress, unfixable, skip, no fix text), that lessons reach
// the next prompt, that faults are retried, and that every request is recorded.
#include "scripted_model/scripted_model_server.h"

#include <httplib.h>

#include <algorithm>
#include <fstream>
#include <latch>
#include <map>
#include <optional>
#include <thread>

#include <fmt/format.h>
#include <catch2/catch.hpp>

#include "engine/temp_dir.h"
#include "roles/architect.h"
#include "roles/openai_client.h"
#include "roles/reflector.h"
#include "roles/worker.h"
#include "scripted_model/prompt_reading.h"
#include "scripted_model/scripted_answers.h"

using namespace temper;
using namespace temper::scripted;
using Catch::Contains;
using Catch::StartsWith;
using nlohmann::json;
using namespace std::chrono_literals;

namespace {

// From ssg-ubuntu2004-ds.xml (Debian 12 ssg-debderived), STIG profile, values substituted.
const std::string kSyncookiesFix = R"FIX(# Remediation is applicable only in certain platforms
if [ ! -f /.dockerenv ] && [ ! -f /run/.containerenv ]; then

# Comment out any occurrences of net.ipv4.tcp_syncookies from /etc/sysctl.d/*.conf files

for f in /etc/sysctl.d/*.conf /run/sysctl.d/*.conf /usr/local/lib/sysctl.d/*.conf /usr/lib/sysctl.d/*.conf; do

  matching_list=$(grep -P '^(?!#).*[\s]*net.ipv4.tcp_syncookies.*$' $f | uniq )
  if ! test -z "$matching_list"; then
    while IFS= read -r entry; do
      escaped_entry=$(sed -e 's|/|\\/|g' <<< "$entry")
      # comment out "net.ipv4.tcp_syncookies" matches to preserve user data
      sed -i "s/^${escaped_entry}$/# &/g" $f
    done <<< "$matching_list"
  fi
done
sysctl_net_ipv4_tcp_syncookies_value='1'

#
# Set runtime for net.ipv4.tcp_syncookies
#
/sbin/sysctl -q -n -w net.ipv4.tcp_syncookies="$sysctl_net_ipv4_tcp_syncookies_value"

#
# If net.ipv4.tcp_syncookies present in /etc/sysctl.conf, change value to appropriate value
#	else, add "net.ipv4.tcp_syncookies = value" to /etc/sysctl.conf
#
# Test if the config_file is a symbolic link. If so, use --follow-symlinks with sed.
# Otherwise, regular sed command will do.
sed_command=('sed' '-i')
if test -L "/etc/sysctl.conf"; then
    sed_command+=('--follow-symlinks')
fi

# Strip any search characters in the key arg so that the key can be replaced without
# adding any search characters to the config file.
stripped_key=$(sed 's/[\^=\$,;+]*//g' <<< "^net.ipv4.tcp_syncookies")

# shellcheck disable=SC2059
printf -v formatted_output "%s = %s" "$stripped_key" "$sysctl_net_ipv4_tcp_syncookies_value"

# If the key exists, change it. Otherwise, add it to the config_file.
# We search for the key string followed by a word boundary (matched by \>),
# so if we search for 'setting', 'setting2' won't match.
if LC_ALL=C grep -q -m 1 -i -e "^net.ipv4.tcp_syncookies\\>" "/etc/sysctl.conf"; then
    escaped_formatted_output=$(sed -e 's|/|\\/|g' <<< "$formatted_output")
    "${sed_command[@]}" "s/^net.ipv4.tcp_syncookies\\>.*/$escaped_formatted_output/gi" "/etc/sysctl.conf"
else
    # \n is precaution for case where file ends without trailing newline
    
    printf '%s\n' "$formatted_output" >> "/etc/sysctl.conf"
fi

else
    >&2 echo 'Remediation is not applicable, nothing was done'
fi)FIX";

const std::string kAideFix = R"FIX(# Remediation is applicable only in certain platforms
if [ ! -f /.dockerenv ] && [ ! -f /run/.containerenv ]; then

DEBIAN_FRONTEND=noninteractive apt-get install -y "aide"

else
    >&2 echo 'Remediation is not applicable, nothing was done'
fi)FIX";

// Refused by the command policy on purpose: it takes the network down.
const std::string kWirelessFix = R"FIX(if
    rpm -q NetworkManager
then
    nmcli radio all off
else
    echo "NetworkManager package not installed" >&2
fi)FIX";

RuleInfo SyncookiesRule() {
  RuleInfo r;
  r.id = "xccdf_org.ssgproject.content_rule_sysctl_net_ipv4_tcp_syncookies";
  r.title = "Enable Kernel Parameter to Use TCP Syncookies on Network Interfaces";
  r.severity = "medium";
  r.check_text =
      "The kernel parameter net.ipv4.tcp_syncookies is set to 1 at runtime and in /etc/sysctl.conf or /etc/sysctl.d.";
  r.fix_text = kSyncookiesFix;
  r.references = {"UBTU-20-010412", "CCI-001095"};
  return r;
}

RuleInfo AideRule() {
  RuleInfo r;
  r.id = "xccdf_org.ssgproject.content_rule_package_aide_installed";
  r.title = "Install AIDE";
  r.severity = "medium";
  r.check_text = "The package aide is installed.";
  r.fix_text = kAideFix;
  r.references = {"UBTU-20-010450"};
  return r;
}

// SSG ships no bash fix for this rule.
RuleInfo McAfeeRule() {
  RuleInfo r;
  r.id = "xccdf_org.ssgproject.content_rule_package_mcafeetp_installed";
  r.title = "Install McAfee Endpoint Security for Linux (ENSL)";
  r.severity = "medium";
  r.check_text = "The package mcafeetp is installed.";
  return r;
}

// The target as the Worker sees it, in memory: a test double recording what it is asked to do
// (this suite is about the model server; real targets are tested in tests/stig).
class RecordingTools final : public WorkerTools {
 public:
  std::vector<std::string> commands;
  std::map<std::string, std::string> files;

  Result<CommandResult> RunCommand(const std::string& command, std::chrono::seconds) override {
    commands.push_back(command);
    return CommandResult{0, "", false};
  }
  Result<std::string> ReadFile(const std::string& path, size_t max_bytes) override {
    auto it = files.find(path);
    if (it == files.end()) return Status::NotFound(path + " does not exist");
    return it->second.substr(0, max_bytes);
  }
  Status WriteFile(const std::string& path, const std::string& content) override {
    files[path] = content;
    return Status::OK();
  }
  // The scripted model fixes through run_command alone.
  Result<std::string> InstallPackages(const std::vector<std::string>&, std::chrono::seconds) override {
    return Status::FailedPrecondition("the recording target has no package manager");
  }
  Result<std::string> RemovePackages(const std::vector<std::string>&, bool, std::chrono::seconds) override {
    return Status::FailedPrecondition("the recording target has no package manager");
  }
};

RoleConfig Role(const char* name) {
  RoleConfig c;
  c.role = name;
  c.endpoint = "scripted";
  c.max_output_tokens = 2048;
  c.context_tokens = 32768;
  return c;
}

// A scripted server, a real OpenAIClient pointed at it (recording its waits instead of sleeping),
// and the three roles.
struct Harness {
  Logger logger{LogLevel::kError};
  PromptLibrary prompts = PromptLibrary::Embedded();
  BytesTokenEstimator estimator;
  Architect architect{prompts, Role("architect"), estimator};
  Worker worker{prompts, Role("worker"), estimator, WorkerBudget{}};
  Reflector reflector{prompts, Role("reflector"), estimator};
  std::vector<std::chrono::milliseconds> sleeps;
  std::unique_ptr<ScriptedModelServer> server;
  std::unique_ptr<OpenAIClient> client;

  explicit Harness(ModelScript script = {}, ScriptedModelOptions server_options = {}) {
    auto s = ScriptedModelServer::Start(std::move(script), std::move(server_options));
    REQUIRE(s.ok());
    server = std::move(*s);
    OpenAIEndpoint endpoint;
    endpoint.base_url = server->base_url();
    endpoint.model = "gemma-scripted";
    OpenAIClientOptions options;
    options.sleep = [this](std::chrono::milliseconds d) { sleeps.push_back(d); };
    auto c = OpenAIClient::Create("scripted", endpoint, logger, options);
    REQUIRE(c.ok());
    client = std::move(*c);
  }

  ChatResponse Ask(const Result<RolePrompt>& prompt, const StreamCallbacks* stream = nullptr) {
    REQUIRE(prompt.ok());
    auto r = client->Chat(prompt->request, stream);
    REQUIRE(r.ok());
    return *r;
  }

  WorkerResult Attempt(RecordingTools& tools, const WorkerTask& task) {
    auto r = worker.Run(*client, tools, task);
    REQUIRE(r.ok());
    return *r;
  }

  std::vector<RecordedRequest> Requests(std::string_view role) const {
    std::vector<RecordedRequest> out;
    for (RecordedRequest& r : server->requests()) {
      if (r.role == role) out.push_back(std::move(r));
    }
    return out;
  }
};

WorkerTask Task(RuleInfo rule, std::vector<PastAttempt> prior = {}, std::vector<Lesson> lessons = {}) {
  WorkerTask t;
  t.rule = std::move(rule);
  t.approach = "Apply the SCAP Security Guide fix as given.";
  t.prior_attempts = std::move(prior);
  t.lessons = std::move(lessons);
  return t;
}

std::string UserText(const RecordedRequest& r) { return r.messages.at(1).at("content").get<std::string>(); }

std::string RunFixCommand(const std::string& path) {
  return "bash " + path + "; status=$?; rm -f " + path + "; exit $status";
}

// Where the Worker's apply_reference_fix writes the rule's fix (roles/worker.cpp), which it runs
// with RunFixCommand.
std::string ReferenceFixPath(const RuleInfo& rule) {
  return "/root/temper-reference-fix-" + ShortRuleName(rule.id) + ".sh";
}

// `prompt` as a Worker offers it for a rule without a reference fix by name: the scripted model
// then writes the fix text itself (the long write_file turn) and runs it.
RolePrompt WithoutReferenceFix(Result<RolePrompt> prompt) {
  REQUIRE(prompt.ok());
  std::erase_if(prompt->request.tools, [](const ToolDeclaration& t) { return t.name == "apply_reference_fix"; });
  return *std::move(prompt);
}

}  // namespace

TEST_CASE("the Worker runs the rule's reference fix by name and finishes, every turn is recorded") {
  Harness h;
  RecordingTools tools;
  const RuleInfo rule = SyncookiesRule();
  const WorkerResult r = h.Attempt(tools, Task(rule));
  CHECK(r.outcome == WorkerOutcome::kFinished);
  const std::string path = "/root/temper-reference-fix-sysctl_net_ipv4_tcp_syncookies.sh";
  CHECK(ReferenceFixPath(rule) == path);
  REQUIRE(tools.files.count(path) == 1);
  CHECK(tools.files[path] == kSyncookiesFix + "\n");
  CHECK(tools.commands == std::vector<std::string>{RunFixCommand(path)});
  CHECK_THAT(r.summary, StartsWith("Applied the SCAP Security Guide fix for sysctl_net_ipv4_tcp_syncookies with "
                                   "apply_reference_fix") &&
                            Contains("(exit status 0)"));
  CHECK(r.steps == 1);
  CHECK(r.model_calls == 2);

  const auto requests = h.server->requests();
  REQUIRE(requests.size() == 2);
  uint64_t prompt_tokens = 0;
  for (size_t i = 0; i < requests.size(); ++i) {
    CHECK(requests[i].seq == i + 1);
    CHECK(requests[i].role == "worker");
    CHECK(requests[i].rule_id == rule.id);
    CHECK(requests[i].attempt == 1);
    CHECK(requests[i].turn == static_cast<int>(i) + 1);
    CHECK(requests[i].http_status == 200);
    CHECK_FALSE(requests[i].stream);
    prompt_tokens +=
        (PromptText(json{{"messages", requests[i].messages}, {"tools", requests[i].tools}}).size() + 3) / 4;
  }
  CHECK_THAT(UserText(requests[0]), Contains("### Fix (SCAP Security Guide)\n" + kSyncookiesFix.substr(0, 60)));
  CHECK(requests[0].answer["tool_calls"][0]["function"]["name"] == "apply_reference_fix");
  CHECK(requests[1].answer["tool_calls"][0]["function"]["name"] == "finish");
  // The last turn was shown the fix script's result.
  CHECK(requests[1].messages.back()["role"] == "tool");
  CHECK_THAT(requests[1].messages.back()["content"].get<std::string>(), StartsWith("exit status 0"));
  // Usage is the server's estimate (4 bytes a token), which the Worker sums: the fix is not retyped.
  CHECK(r.usage.prompt_tokens == prompt_tokens);
  CHECK(r.usage.completion_tokens < kSyncookiesFix.size() / 4);
}

// Where the Worker does not offer the reference fix by name, the scripted model types the fix text
// into write_file and runs it, as a model must then.
TEST_CASE("without apply_reference_fix on offer the Worker's model writes the fix script and runs it") {
  Harness h;
  const RuleInfo rule = SyncookiesRule();
  CHECK(FixScriptPath(rule.id) == "/root/temper-fix-sysctl_net_ipv4_tcp_syncookies.sh");
  const ChatResponse call = h.Ask(WithoutReferenceFix(h.worker.BuildPrompt(Task(rule))));
  REQUIRE(call.tool_calls.size() == 1);
  CHECK(call.tool_calls[0].name == "write_file");
  CHECK(json::parse(call.tool_calls[0].arguments) ==
        json{{"path", FixScriptPath(rule.id)}, {"content", kSyncookiesFix + "\n"}});
  CHECK(call.usage.completion_tokens > kSyncookiesFix.size() / 4);
}

TEST_CASE("a transcript keeps each answered request and its answer as one JSON line") {
  const engine::testing::TempDir dir;
  const std::string path = (dir.path() / "t.jsonl").string();
  {
    ScriptedModelOptions options;
    options.transcript = path;
    Harness h({}, options);
    RecordingTools tools;
    const RuleInfo rule = SyncookiesRule();
    REQUIRE(h.Attempt(tools, Task(rule)).outcome == WorkerOutcome::kFinished);
    const auto requests = h.server->requests();
    std::ifstream in(path);
    std::vector<json> lines;
    for (std::string line; std::getline(in, line);) lines.push_back(json::parse(line));
    REQUIRE(lines.size() == requests.size());
    for (size_t i = 0; i < lines.size(); ++i) {
      CHECK(lines[i]["role"] == "worker");
      CHECK(lines[i]["rule_id"] == rule.id);
      CHECK(lines[i]["turn"] == static_cast<int>(i) + 1);
      CHECK(lines[i]["messages"] == requests[i].messages);
      CHECK(lines[i]["answer"] == requests[i].answer);
      CHECK(lines[i]["tools"].is_array());  // the Worker's tool declarations, as sent
    }
  }
  // A transcript that cannot be opened stops the server from starting, naming the file.
  ScriptedModelOptions options;
  options.transcript = "/nonexistent-dir/t.jsonl";
  auto s = ScriptedModelServer::Start({}, options);
  REQUIRE_FALSE(s.ok());
  CHECK_THAT(s.status().ToString(), Contains("/nonexistent-dir/t.jsonl"));
}

TEST_CASE("wrong_first: attempt 1 is a harmless wrong write, its lesson reaches attempt 2, which fixes") {
  ModelScript script;
  script.rules["sysctl_net_ipv4_tcp_syncookies"].wrong_first = 1;
  Harness h(script);
  const RuleInfo rule = SyncookiesRule();

  RecordingTools first;
  const WorkerResult a1 = h.Attempt(first, Task(rule));
  CHECK(a1.outcome == WorkerOutcome::kFinished);
  CHECK(first.files.empty());
  REQUIRE(first.commands.size() == 1);
  CHECK_THAT(first.commands[0],
             StartsWith("echo ") && Contains(">> /root/temper-wrong-sysctl_net_ipv4_tcp_syncookies.txt"));
  CHECK_THAT(a1.summary, Contains("deliberately wrong attempt"));

  PastAttempt failed;
  failed.number = 1;
  failed.approach = "Apply the SCAP Security Guide fix as given.";
  failed.actions = a1.actions;
  failed.verdict = "fail";
  failed.evidence =
      "oval:ssg-sysctl_net_ipv4_tcp_syncookies:def:1 false\n"
      "  sysctl runtime: net.ipv4.tcp_syncookies = 0 (expected 1)";
  const auto reflection = h.reflector.Parse(h.Ask(h.reflector.Build(rule, failed, {}, {})));
  REQUIRE(reflection.ok());
  CHECK(LessonMarker(rule.id, 1) == "LESSON-sysctl_net_ipv4_tcp_syncookies-1");
  CHECK_THAT(reflection->lesson, StartsWith("LESSON-sysctl_net_ipv4_tcp_syncookies-1: "));
  CHECK(reflection->lesson.size() <= Reflector::kMaxLessonChars);
  CHECK_THAT(reflection->why_failed, Contains("\"oval:ssg-sysctl_net_ipv4_tcp_syncookies:def:1 false\""));
  CHECK_THAT(reflection->tried, StartsWith("$ echo "));
  CHECK(reflection->never == std::vector<std::string>{reflection->tried});
  const auto reflector_requests = h.Requests("reflector");
  REQUIRE(reflector_requests.size() == 1);
  CHECK(reflector_requests[0].attempt == 1);
  CHECK(reflector_requests[0].rule_id == rule.id);

  failed.lesson = reflection->lesson;
  RecordingTools second;
  const WorkerResult a2 = h.Attempt(second, Task(rule, {failed}, {Lesson{rule.id, reflection->lesson, 0.5, true}}));
  CHECK(a2.outcome == WorkerOutcome::kFinished);
  CHECK(second.files.count(ReferenceFixPath(rule)) == 1);
  CHECK(second.commands == std::vector<std::string>{RunFixCommand(ReferenceFixPath(rule))});

  const auto worker_requests = h.Requests("worker");
  REQUIRE(worker_requests.size() == 4);  // 2 turns, then 2
  CHECK(worker_requests[1].attempt == 1);
  CHECK(worker_requests[2].attempt == 2);
  CHECK(worker_requests[2].turn == 1);
  CHECK_THAT(UserText(worker_requests[2]),
             Contains("## Attempt 1 — fail") && Contains("LESSON-sysctl_net_ipv4_tcp_syncookies-1"));
  CHECK_THAT(UserText(worker_requests[0]), !Contains("LESSON-"));
}

TEST_CASE("regress: attempt 1 fixes and breaks the login-shell health check, attempt 2 only fixes") {
  ModelScript script;
  script.rules["package_aide_installed"].regress_first = 1;
  Harness h(script);
  const RuleInfo rule = AideRule();
  const std::string path = ReferenceFixPath(rule);

  RecordingTools first;
  const WorkerResult a1 = h.Attempt(first, Task(rule));
  CHECK(first.files[path] == kAideFix + "\n");
  CHECK(DefaultRegressCommand(rule.id) ==
        "printf 'exit 1\\n' > /etc/profile.d/zz-temper-regress-package_aide_installed.sh");
  CHECK(first.commands == std::vector<std::string>{RunFixCommand(path), DefaultRegressCommand(rule.id)});
  CHECK_THAT(a1.summary, Contains("deliberate regression"));

  PastAttempt unhealthy{1, "Apply the fix.", a1.actions, "unhealthy", "health check login-shell failed: exit 1", ""};
  RecordingTools second;
  h.Attempt(second, Task(rule, {unhealthy}));
  CHECK(second.files[path] == kAideFix + "\n");
  CHECK(second.commands == std::vector<std::string>{RunFixCommand(path)});
}

TEST_CASE(
    "re-engagement: CONTINUE by default, ESCALATE for unfixable rules and rules without fix text, PIVOT when "
    "scripted") {
  ModelScript script;
  script.rules["sysctl_net_ipv4_tcp_syncookies"].unfixable = true;
  script.rules["package_aide_installed"].reengage = Reengage::kPivot;
  Harness h(script);
  const std::vector<PastAttempt> attempts = {{1, "Apply the fix.", "", "fail", "def:1 false", "LESSON-x-1"},
                                             {2, "Apply the fix.", "", "fail", "def:1 false", "LESSON-x-2"}};
  auto decide = [&](const RuleInfo& rule) {
    auto d = h.architect.ParseReengage(h.Ask(h.architect.BuildReengage(rule, "Apply the fix.", attempts, {})));
    REQUIRE(d.ok());
    return *d;
  };

  const ReengageDecision unfixable = decide(SyncookiesRule());
  CHECK(unfixable.verdict == ReengageVerdict::kEscalate);
  CHECK_THAT(unfixable.reasoning,
             Contains("2 attempts at sysctl_net_ipv4_tcp_syncookies have failed (last verdict: fail)"));

  const ReengageDecision pivot = decide(AideRule());
  CHECK(pivot.verdict == ReengageVerdict::kPivot);
  CHECK_THAT(pivot.plan, Contains(FixScriptPath(AideRule().id)));

  RuleInfo other = SyncookiesRule();
  other.id = "xccdf_org.ssgproject.content_rule_sysctl_net_ipv4_conf_all_accept_redirects";
  CHECK(decide(other).verdict == ReengageVerdict::kContinue);

  const ReengageDecision no_fix = decide(McAfeeRule());
  CHECK(no_fix.verdict == ReengageVerdict::kEscalate);
  CHECK_THAT(no_fix.reasoning, Contains("no usable fix text for package_mcafeetp_installed"));

  const auto requests = h.Requests("architect_reengage");
  REQUIRE(requests.size() == 4);
  CHECK(requests[0].rule_id == SyncookiesRule().id);
  CHECK(requests[0].attempt == 2);

  // Unfixable: every attempt is the wrong one, however many came before.
  RecordingTools third;
  h.Attempt(third, Task(SyncookiesRule(), attempts));
  CHECK(third.files.empty());
  REQUIRE(third.commands.size() == 1);
  CHECK_THAT(third.commands[0], Contains("attempt 3") && Contains(WrongNotePath(SyncookiesRule().id)));
}

TEST_CASE("a rule without fix text: the Worker changes nothing and says so at once") {
  Harness h;
  RecordingTools tools;
  const WorkerResult r = h.Attempt(tools, Task(McAfeeRule()));
  CHECK(r.outcome == WorkerOutcome::kFinished);
  CHECK(r.model_calls == 1);
  CHECK(tools.commands.empty());
  CHECK(tools.files.empty());
  CHECK_THAT(r.summary,
             Contains("the prompt has no SCAP Security Guide fix text") && Contains("A human has to decide"));
}

TEST_CASE("a fix cut short by the prompt budget is run whole by name, and never retyped cut short") {
  Harness h;
  const RuleInfo rule = SyncookiesRule();
  // The smallest Worker context that keeps part of the rule's details: its fix is then truncated.
  std::optional<Worker> tight;
  for (uint32_t context = 1100; context < 8192 && !tight; context += 32) {
    RoleConfig config = Role("worker");
    config.max_output_tokens = 1024;
    config.context_tokens = context;
    Worker candidate(h.prompts, config, h.estimator, WorkerBudget{});
    auto prompt = candidate.BuildPrompt(Task(rule));
    if (!prompt.ok()) continue;
    for (const TrimmedSection& t : prompt->trimmed) {
      if (t.name == "rule details " + rule.id && t.kept_tokens > 0 &&
          prompt->request.messages[1].content.find("### Fix (SCAP Security Guide)") != std::string::npos) {
        tight.emplace(h.prompts, config, h.estimator, WorkerBudget{});
      }
    }
  }
  REQUIRE(tight);
  // By name, the tool takes the whole fix from the rule, not from the prompt.
  RecordingTools tools;
  auto r = tight->Run(*h.client, tools, Task(rule));
  REQUIRE(r.ok());
  REQUIRE(tools.files.size() == 1);
  CHECK_THAT(tools.files.begin()->second, StartsWith(kSyncookiesFix));  // and a final newline
  CHECK_THAT(r->summary, Contains("apply_reference_fix"));
  // A model that would have to retype it changes nothing and says why.
  const ChatResponse call = h.Ask(WithoutReferenceFix(tight->BuildPrompt(Task(rule))));
  REQUIRE(call.tool_calls.size() == 1);
  CHECK(call.tool_calls[0].name == "finish");
  CHECK_THAT(call.tool_calls[0].arguments,
             Contains("the SCAP Security Guide fix text was cut short by the prompt budget"));
}

TEST_CASE("a fix the command policy refuses ends the attempt with a finish quoting the refusal") {
  Harness h;
  RecordingTools tools;
  RuleInfo rule;
  rule.id = "xccdf_org.ssgproject.content_rule_wireless_disable_interfaces";
  rule.title = "Deactivate Wireless Network Interfaces";
  rule.fix_text = kWirelessFix;
  const WorkerResult r = h.Attempt(tools, Task(rule));
  CHECK(r.outcome == WorkerOutcome::kFinished);
  // Writing the script is allowed; running it is judged by its content, and refused: only the
  // removal of the script's file reached the target.
  CHECK(tools.files.size() == 1);
  CHECK(tools.commands == std::vector<std::string>{"rm -f " + ReferenceFixPath(rule)});
  CHECK_THAT(r.summary, StartsWith("Stopped: the policy refused my apply_reference_fix call: refused by policy: "
                                   "'nmcli radio all off'"));
}

TEST_CASE(
    "the Architect picks the first candidate with an approach naming its reference fix, and skips scripted skips") {
  ArchitectInput input;
  input.batch.total = input.batch.pending = 2;
  input.candidates = {AideRule(), SyncookiesRule()};
  {
    Harness h;
    const auto pick = h.architect.ParsePick(h.Ask(h.architect.BuildPick(input)), input);
    REQUIRE(pick.ok());
    CHECK(pick->kind == ArchitectPick::Kind::kAttempt);
    CHECK(pick->rule_id == AideRule().id);
    CHECK(pick->approach ==
          "Apply the SCAP Security Guide reference fix for package_aide_installed (Install AIDE) as written, check its "
          "exit status, then finish.");
    const auto requests = h.Requests("architect");
    REQUIRE(requests.size() == 1);
    CHECK(requests[0].rule_id == AideRule().id);
    CHECK(requests[0].attempt == 0);
  }
  ModelScript script;
  script.rules["package_aide_installed"].skip = true;
  Harness h(script);
  const auto skip = h.architect.ParsePick(h.Ask(h.architect.BuildPick(input)), input);
  REQUIRE(skip.ok());
  CHECK(skip->kind == ArchitectPick::Kind::kSkip);
  CHECK(skip->rule_id == AideRule().id);
  CHECK_THAT(skip->reason, Contains("package_aide_installed is left to a human"));
  input.candidates = {SyncookiesRule()};  // the orchestrator drops the skipped rule and asks again
  const auto next = h.architect.ParsePick(h.Ask(h.architect.BuildPick(input)), input);
  REQUIRE(next.ok());
  CHECK(next->kind == ArchitectPick::Kind::kAttempt);
  CHECK(next->rule_id == SyncookiesRule().id);
  // A candidate whose line says SSG ships no fix gets a plan that changes nothing.
  RuleInfo unfixable = SyncookiesRule();
  unfixable.fix_text.clear();
  input.candidates = {unfixable};
  const auto none = h.architect.ParsePick(h.Ask(h.architect.BuildPick(input)), input);
  REQUIRE(none.ok());
  CHECK_THAT(none->approach, Contains("has no reference fix: change nothing"));
}

TEST_CASE("tool_calls: text writes each call as JSON in the content, and the Worker resolves it the same") {
  ModelScript script;
  script.tool_calls = ToolCallStyle::kText;
  Harness h(script);
  RecordingTools tools;
  const RuleInfo rule = SyncookiesRule();
  const WorkerResult r = h.Attempt(tools, Task(rule));
  CHECK(r.outcome == WorkerOutcome::kFinished);
  CHECK(tools.files[ReferenceFixPath(rule)] == kSyncookiesFix + "\n");
  CHECK(tools.commands == std::vector<std::string>{RunFixCommand(ReferenceFixPath(rule))});
  const auto requests = h.server->requests();
  REQUIRE(requests.size() == 2);
  for (const RecordedRequest& req : requests) {
    CHECK_FALSE(req.answer.contains("tool_calls"));
    CHECK_THAT(req.answer["content"].get<std::string>(), Contains("```json\n{\"name\":"));
  }
  CHECK(requests[1].turn == 2);  // the turn is read from the Worker's echo of the calls it resolved
}

TEST_CASE("streamed replies (SSE) carry the same answers in pieces, with usage") {
  Harness h;
  ArchitectInput input;
  input.candidates = {SyncookiesRule()};
  const auto prompt = h.architect.BuildPick(input);
  const ChatResponse whole = h.Ask(prompt);
  std::vector<std::string> pieces;
  StreamCallbacks callbacks;
  callbacks.on_text = [&](std::string_view t) { pieces.emplace_back(t); };
  const ChatResponse streamed = h.Ask(prompt, &callbacks);
  CHECK(streamed.text == whole.text);
  CHECK(pieces.size() > 2);
  CHECK(streamed.finish_reason == FinishReason::kStop);
  CHECK(streamed.usage.prompt_tokens == whole.usage.prompt_tokens);
  CHECK(streamed.usage.completion_tokens == (whole.text.size() + 3) / 4);
  CHECK(streamed.usage.prompt_tokens > 0);

  // A Worker turn streams its tool call's arguments in pieces.
  const auto worker_prompt = WithoutReferenceFix(h.worker.BuildPrompt(Task(SyncookiesRule())));
  const ChatResponse call = h.Ask(worker_prompt, &callbacks);
  CHECK(call.finish_reason == FinishReason::kToolCalls);
  REQUIRE(call.tool_calls.size() == 1);
  CHECK(call.tool_calls[0].name == "write_file");
  CHECK(call.tool_calls[0].id == "call-1-1");
  CHECK(json::parse(call.tool_calls[0].arguments)["content"] == kSyncookiesFix + "\n");

  const auto requests = h.server->requests();
  REQUIRE(requests.size() == 3);
  CHECK_FALSE(requests[0].stream);
  CHECK(requests[1].stream);
  CHECK(requests[2].stream);
}

TEST_CASE("scripted faults: 429 with Retry-After, 500, and a cut stream are retried by the client") {
  ArchitectInput input;
  input.candidates = {AideRule()};
  SECTION("429 with Retry-After") {
    ModelScript script;
    script.faults = {.fail_first = 2, .fail_status = 429, .retry_after_seconds = 3};
    Harness h(script);
    const ChatResponse r = h.Ask(h.architect.BuildPick(input));
    CHECK(r.attempts == 3);
    CHECK(h.sleeps == std::vector<std::chrono::milliseconds>{3000ms, 3000ms});
    const auto requests = h.server->requests();
    REQUIRE(requests.size() == 3);
    CHECK(requests[0].http_status == 429);
    CHECK_THAT(requests[0].error, Contains("scripted fault"));
    CHECK(requests[1].http_status == 429);
    CHECK(requests[2].http_status == 200);
    CHECK(requests[0].role == "architect");  // faults are recorded with what was asked
  }
  SECTION("500") {
    ModelScript script;
    script.faults = {.fail_first = 1, .fail_status = 500};
    Harness h(script);
    const ChatResponse r = h.Ask(h.architect.BuildPick(input));
    CHECK(r.attempts == 2);
    CHECK(h.sleeps.size() == 1);  // the client's own backoff: no Retry-After with 500
    CHECK(h.server->requests()[0].http_status == 500);
  }
  SECTION("a stream cut before any text") {
    ModelScript script;
    script.faults.cut_streams_first = 1;
    Harness h(script);
    StreamCallbacks callbacks;
    std::string text;
    callbacks.on_text = [&](std::string_view t) { text += t; };
    const ChatResponse r = h.Ask(h.architect.BuildPick(input), &callbacks);
    CHECK(r.attempts == 2);
    CHECK(text == r.text);
    const auto requests = h.server->requests();
    REQUIRE(requests.size() == 2);
    CHECK_THAT(requests[0].error, Contains("cut after its first chunk"));
    CHECK(requests[1].error.empty());
  }
  SECTION("a stream cut after text was shown is not retried") {
    ModelScript script;
    script.faults.cut_streams_first = 1;
    script.faults.cut_after_text = true;
    Harness h(script);
    StreamCallbacks callbacks;
    std::string text;
    callbacks.on_text = [&](std::string_view t) { text += t; };
    auto prompt = h.architect.BuildPick(input);
    REQUIRE(prompt.ok());
    auto r = h.client->Chat(prompt->request, &callbacks);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == StatusCode::kDataLoss);
    CHECK_THAT(text, StartsWith("{\"decision\":\"attempt\""));
    CHECK(h.server->requests().size() == 1);
  }
}

TEST_CASE("Worker loops on several threads at once are all answered and recorded") {
  Harness h;
  constexpr int kThreads = 6;
  std::vector<RecordingTools> tools(kThreads);
  std::vector<Result<WorkerResult>> results(kThreads, Status::Internal("not run"));
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back(
        [&, i] { results[i] = h.worker.Run(*h.client, tools[i], Task(i % 2 ? AideRule() : SyncookiesRule())); });
  }
  for (std::thread& t : threads) t.join();
  for (int i = 0; i < kThreads; ++i) {
    REQUIRE(results[i].ok());
    CHECK(results[i]->outcome == WorkerOutcome::kFinished);
    const RuleInfo rule = i % 2 ? AideRule() : SyncookiesRule();
    CHECK(tools[i].files[ReferenceFixPath(rule)] == rule.fix_text + "\n");
  }
  const auto requests = h.server->requests();
  REQUIRE(requests.size() == 2 * kThreads);
  for (size_t i = 0; i < requests.size(); ++i) CHECK(requests[i].seq == i + 1);
}

TEST_CASE("requests it cannot read are answered 400 naming the problem, /v1/models lists the model") {
  Harness h;
  httplib::Client http("127.0.0.1", h.server->port());
  auto not_json = http.Post("/v1/chat/completions", "{not json", "application/json");
  REQUIRE(not_json);
  CHECK(not_json->status == 400);
  CHECK(json::parse(not_json->body)["error"]["message"] == "the body is not JSON");

  json body = {{"model", "m"},
               {"messages",
                {{{"role", "system"}, {"content", "You are a helpful assistant.\nBe brief."}},
                 {{"role", "user"}, {"content", "hello"}}}}};
  auto no_role = http.Post("/v1/chat/completions", body.dump(), "application/json");
  REQUIRE(no_role);
  CHECK(no_role->status == 400);
  CHECK_THAT(json::parse(no_role->body)["error"]["message"].get<std::string>(),
             Contains("first line 'You are a helpful assistant.' names no role"));

  body["messages"][0]["content"] = "You are the Worker of temper.";
  auto no_rule = http.Post("/v1/chat/completions", body.dump(), "application/json");
  REQUIRE(no_rule);
  CHECK(no_rule->status == 400);
  CHECK_THAT(no_rule->body, Contains("no \\\"## Rule\\\" section"));

  auto models = http.Get("/v1/models");
  REQUIRE(models);
  CHECK(models->status == 200);
  CHECK(json::parse(models->body)["data"][0]["id"] == "temper-scripted");

  const auto requests = h.server->requests();
  REQUIRE(requests.size() == 3);
  for (const RecordedRequest& r : requests) {
    CHECK(r.http_status == 400);
    CHECK_FALSE(r.error.empty());
    CHECK(r.answer.is_null());
  }
  CHECK(requests[2].messages.size() == 2);
}

// ---------------------------------------------------------------------------------------------------
// Simulated model time (latency_model.h): high rates and small answers keep these under two seconds;
// they check the server's simulated times (exact for requests alone in the engine) and the wall clock
// only from below.

namespace {

ScriptedModelOptions Simulated(std::vector<CurvePoint> curve, double prefill_tok_s = 0) {
  LatencyModel m;
  m.batch_curve = std::move(curve);
  m.prefill_tok_s = prefill_tok_s;
  ScriptedModelOptions o;
  o.latency = m;
  return o;
}

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

TEST_CASE(
    "simulated: a whole reply comes after its prefill and decode, and a re-sent conversation prefills only its "
    "new suffix") {
  constexpr double kDecode = 2000, kPrefill = 20000;
  Harness h({}, Simulated({{1, kDecode}}, kPrefill));
  RecordingTools tools;
  const auto start = std::chrono::steady_clock::now();
  h.Attempt(tools, Task(SyncookiesRule()));  // 2 Worker turns, one after the other
  const double wall = SecondsSince(start);

  const auto requests = h.server->requests();
  REQUIRE(requests.size() == 2);
  double simulated = 0;
  for (size_t i = 0; i < requests.size(); ++i) {
    const RecordedRequest& r = requests[i];
    REQUIRE(r.simulated);
    const SimulatedTiming& t = *r.simulated;
    CHECK(t.prompt_tokens == r.prompt_tokens);
    CHECK(t.completion_tokens == r.completion_tokens);
    CHECK(t.queue_s == 0);
    CHECK(t.decode_s == Approx(r.completion_tokens / kDecode).epsilon(1e-6));
    CHECK(t.prefill_s == Approx((t.prompt_tokens - t.cached_prompt_tokens) / kPrefill).epsilon(1e-6));
    CHECK(t.mean_batch == Approx(1));
    simulated += t.prefill_s + t.decode_s;
    if (i == 0) {
      CHECK(t.cached_prompt_tokens == 0);
    } else {
      // Each turn re-sends the one before it, then its answer (the call's arguments as generated),
      // then the tool's result: the cache holds the previous prompt and the answer as generated.
      const std::string previous =
          PromptText(json{{"messages", requests[i - 1].messages}, {"tools", requests[i - 1].tools}});
      const std::string now = PromptText(json{{"messages", r.messages}, {"tools", r.tools}});
      const json& call = requests[i - 1].answer["tool_calls"][0]["function"];
      const std::string held = previous + call["name"].get<std::string>() + call["arguments"].get<std::string>();
      CHECK_THAT(now, StartsWith(held));
      const size_t common = std::mismatch(held.begin(), held.end(), now.begin(), now.end()).first - held.begin();
      CHECK(common > previous.size());
      CHECK(t.cached_prompt_tokens == common / 4);
    }
  }
  CHECK(requests[0].completion_tokens < kSyncookiesFix.size() / 4);  // apply_reference_fix, not the script
  CHECK(wall >= 0.95 * simulated);

  // The same prompt again (a retry): all but its last token is cached.
  ArchitectInput input;
  input.candidates = {AideRule()};
  const auto prompt = h.architect.BuildPick(input);
  h.Ask(prompt);
  h.Ask(prompt);
  const auto picks = h.Requests("architect");
  REQUIRE(picks.size() == 2);
  REQUIRE(picks[0].simulated);
  REQUIRE(picks[1].simulated);
  CHECK(picks[1].simulated->cached_prompt_tokens == picks[1].prompt_tokens - 1);
  CHECK(picks[1].simulated->prefill_s == Approx(1 / kPrefill));
  // Another role's prompt shares little with the Worker's conversation.
  CHECK(picks[0].simulated->cached_prompt_tokens < picks[0].prompt_tokens / 2);

  const ServingMetrics m = h.server->Metrics();
  CHECK(m.requests == 4);
  REQUIRE(m.simulated);
  uint64_t cached = 0, completion = 0;
  double decode = 0;
  for (const RecordedRequest& r : h.server->requests()) {
    cached += r.simulated->cached_prompt_tokens;
    completion += r.completion_tokens;
    decode += r.simulated->decode_s;
  }
  CHECK(m.simulated->cached_prompt_tokens == cached);
  CHECK(m.completion_tokens == completion);
  CHECK(m.simulated->batch.decode_seconds == Approx(decode));
  CHECK(m.simulated->batch.max_batch == 1);

  httplib::Client http("127.0.0.1", h.server->port());
  auto metrics = http.Get("/metrics");
  REQUIRE(metrics);
  CHECK(metrics->status == 200);
  CHECK_THAT(metrics->body,
             Contains("\ntemper_scripted_requests_total 4\n") && Contains("\ntemper_scripted_simulated 1\n") &&
                 Contains("\ntemper_scripted_paced 1\n") && Contains("\ntemper_scripted_speedup 1\n") &&
                 Contains("\ntemper_scripted_cached_prompt_tokens_total " + std::to_string(cached) + "\n") &&
                 Contains("\ntemper_scripted_max_batch 1\n"));
}

TEST_CASE("per role: requests, prompt, cached and completion tokens and the median prompt, in memory and on /metrics") {
  Harness h({}, Simulated({{1, 1e6}}, 1e7));  // fast: the counts matter here, not the times
  RecordingTools tools;
  h.Attempt(tools, Task(SyncookiesRule()));  // a Worker turn per tool call, then its finish
  ArchitectInput input;
  input.candidates = {AideRule()};
  const auto pick = h.architect.BuildPick(input);
  h.Ask(pick);
  h.Ask(pick);  // the same prompt again: all but its last token cached

  struct Sums {
    uint64_t requests = 0, prompt = 0, cached = 0, completion = 0;
    std::vector<uint64_t> prompts;
  };
  std::map<std::string, Sums> by_role;
  for (const RecordedRequest& r : h.server->requests()) {
    REQUIRE(r.simulated);
    Sums& s = by_role[r.role];
    ++s.requests;
    s.prompt += r.prompt_tokens;
    s.cached += r.simulated->cached_prompt_tokens;
    s.completion += r.completion_tokens;
    s.prompts.push_back(r.prompt_tokens);
  }
  ServingMetrics m = h.server->Metrics();
  const RoleServed& worker = m.For(ScriptedRole::kWorker);
  const RoleServed& picks = m.For(ScriptedRole::kArchitectPick);
  REQUIRE(worker.requests >= 2);
  CHECK(worker.requests == by_role["worker"].requests);
  CHECK(picks.requests == 2);
  CHECK(m.For(ScriptedRole::kReflector).requests == 0);
  CHECK(m.For(ScriptedRole::kArchitectReengage).requests == 0);
  for (const auto& [role, served] : {std::pair{"worker", worker}, std::pair{"architect", picks}}) {
    const Sums& s = by_role[role];
    CHECK(served.requests == s.requests);
    CHECK(served.prompt_tokens == s.prompt);
    CHECK(served.cached_prompt_tokens == s.cached);
    CHECK(served.completion_tokens == s.completion);
    CHECK(served.prompt_tokens_each == s.prompts);
  }
  CHECK(worker.cached_prompt_tokens > 0);                                    // turns 2 and 3 re-send turn 1
  CHECK(picks.cached_prompt_tokens >= by_role["architect"].prompts[1] - 1);  // the repeat: all but its last token
  std::vector<uint64_t> sorted = by_role["worker"].prompts;
  std::sort(sorted.begin(), sorted.end());
  const size_t mid = sorted.size() / 2;
  const double median =
      sorted.size() % 2 == 1 ? static_cast<double>(sorted[mid]) : (sorted[mid - 1] + sorted[mid]) / 2.0;
  CHECK(worker.MedianPromptTokens() == Approx(median));
  CHECK(picks.MedianPromptTokens() ==
        Approx((by_role["architect"].prompts[0] + by_role["architect"].prompts[1]) / 2.0));
  CHECK(m.For(ScriptedRole::kReflector).MedianPromptTokens() == 0);

  httplib::Client http("127.0.0.1", h.server->port());
  auto metrics = http.Get("/metrics");
  REQUIRE(metrics);
  CHECK_THAT(metrics->body,
             Contains(fmt::format("\ntemper_scripted_role_requests_total{{role=\"worker\"}} {}\n", worker.requests)) &&
                 Contains("\ntemper_scripted_role_requests_total{role=\"architect_pick\"} 2\n") &&
                 Contains("\ntemper_scripted_role_requests_total{role=\"reflector\"} 0\n") &&
                 Contains("\ntemper_scripted_role_requests_total{role=\"architect_reengage\"} 0\n") &&
                 Contains(fmt::format("\ntemper_scripted_role_prompt_tokens_total{{role=\"worker\"}} {}\n",
                                      worker.prompt_tokens)) &&
                 Contains(fmt::format("\ntemper_scripted_role_cached_prompt_tokens_total{{role=\"worker\"}} {}\n",
                                      worker.cached_prompt_tokens)) &&
                 Contains(fmt::format("\ntemper_scripted_role_completion_tokens_total{{role=\"architect_pick\"}} {}\n",
                                      picks.completion_tokens)) &&
                 Contains(fmt::format("\ntemper_scripted_role_prompt_tokens_median{{role=\"worker\"}} {}\n", median)));
}

TEST_CASE("simulated max model len: a request that does not fit is refused 400 with vLLM's words and not counted") {
  ScriptedModelOptions options = Simulated({{1, 1e6}}, 1e7);
  options.latency->max_model_len = 64;  // far below any role's prompt
  Harness h({}, options);
  ArchitectInput input;
  input.candidates = {AideRule()};
  const auto pick = h.architect.BuildPick(input);
  REQUIRE(pick.ok());
  auto refused = h.client->Chat(pick->request, nullptr);
  REQUIRE_FALSE(refused.ok());
  CHECK_THAT(refused.status().message(), Contains("This model's maximum context length is 64 tokens. However, your "
                                                  "request has "));
  const auto requests = h.server->requests();
  REQUIRE(requests.size() == 1);  // a 400 is not retried
  CHECK(requests[0].http_status == 400);
  CHECK_THAT(requests[0].error, StartsWith("This model's maximum context length is 64 tokens.") &&
                                    Contains("input tokens. Please reduce the length of the input messages."));
  CHECK(requests[0].answer.is_null());
  CHECK(requests[0].prompt_tokens == 0);
  const ServingMetrics m = h.server->Metrics();
  CHECK(m.requests == 0);
  CHECK(m.For(ScriptedRole::kArchitectPick).requests == 0);
  REQUIRE(m.simulated);
  CHECK(m.simulated->batch.jobs == 0);

  // The prompt alone fits, but not with the max_tokens asked for: vLLM's other refusal.
  const uint64_t prompt_tokens = (PromptText(json{{"messages", requests[0].messages}}).size() + 3) / 4;
  ScriptedModelOptions roomier = Simulated({{1, 1e6}}, 1e7);
  roomier.latency->max_model_len = prompt_tokens + 10;
  Harness h2({}, roomier);
  json body = {{"model", "m"}, {"messages", requests[0].messages}, {"max_tokens", 11}};
  httplib::Client http("127.0.0.1", h2.server->port());
  auto over = http.Post("/v1/chat/completions", body.dump(), "application/json");
  REQUIRE(over);
  CHECK(over->status == 400);
  CHECK(json::parse(over->body)["error"]["message"] ==
        fmt::format("'max_tokens' or 'max_completion_tokens' is too large: 11. This model's maximum context length is "
                    "{0} tokens and your request has {1} input tokens (11 > {0} - {1}).",
                    prompt_tokens + 10, prompt_tokens));
  body["max_tokens"] = 10;  // exactly the context
  auto fits = http.Post("/v1/chat/completions", body.dump(), "application/json");
  REQUIRE(fits);
  CHECK(fits->status == 200);
  CHECK(h2.server->Metrics().For(ScriptedRole::kArchitectPick).requests == 1);
}

TEST_CASE("simulated: a streamed reply sends its chunks as their tokens are decoded") {
  constexpr double kDecode = 400;
  Harness h({}, Simulated({{1, kDecode}}));
  ArchitectInput input;
  input.candidates = {SyncookiesRule()};
  std::vector<double> arrivals;  // seconds from the request to each piece of text
  StreamCallbacks callbacks;
  const auto start = std::chrono::steady_clock::now();
  callbacks.on_text = [&](std::string_view) { arrivals.push_back(SecondsSince(start)); };
  const ChatResponse r = h.Ask(h.architect.BuildPick(input), &callbacks);

  const auto requests = h.server->requests();
  REQUIRE(requests.size() == 1);
  REQUIRE(requests[0].simulated);
  const uint64_t tokens = requests[0].completion_tokens;
  CHECK(r.usage.completion_tokens == tokens);
  CHECK(requests[0].simulated->decode_s == Approx(tokens / kDecode).epsilon(1e-6));
  REQUIRE(arrivals.size() > 4);
  CHECK(tokens > 60);  // ~0.15 s or more of decoding
  // The first piece (64 bytes, 16 tokens) is sent once decoded, the last once all are.
  CHECK(arrivals.back() - arrivals.front() >= 0.95 * (tokens - 16) / kDecode);
  CHECK(arrivals.front() >= 0.95 * 16 / kDecode);
}

TEST_CASE("simulated: streams decoding at once share the batch curve's aggregate rate") {
  // Alone a stream decodes 600 tok/s; four at once 1200 in all, 300 each.
  constexpr double kOne = 600, kFour = 1200;
  constexpr int kStreams = 4;
  Harness h({}, Simulated({{1, kOne}, {4, kFour}}));
  std::latch go(kStreams);
  std::vector<Result<ChatResponse>> replies(kStreams, Status::Internal("not run"));
  std::vector<std::thread> threads;
  // The write_file turn, ~620 tokens.
  const RolePrompt prompt = WithoutReferenceFix(h.worker.BuildPrompt(Task(SyncookiesRule())));
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < kStreams; ++i) {
    threads.emplace_back([&, i] {
      go.arrive_and_wait();
      replies[i] = h.client->Chat(prompt.request, nullptr);
    });
  }
  for (std::thread& t : threads) t.join();
  const double wall = SecondsSince(start);
  for (const auto& r : replies) REQUIRE(r.ok());

  const auto requests = h.server->requests();
  REQUIRE(requests.size() == kStreams);
  const double tokens = static_cast<double>(requests[0].completion_tokens);
  REQUIRE(tokens > 500);
  for (const RecordedRequest& r : requests) {
    REQUIRE(r.simulated);
    // Never faster than a stream alone; slower whenever others decode beside it.
    CHECK(r.simulated->decode_s >= tokens / kOne * (1 - 1e-9));
    CHECK(r.simulated->mean_batch > 1);
  }
  const ServingMetrics metrics = h.server->Metrics();
  REQUIRE(metrics.simulated);
  const BatchSimulation::Totals& b = metrics.simulated->batch;
  CHECK(b.max_batch == kStreams);  // every stream arrived before the first was done (1 s alone)
  // The engine never beats the four-stream aggregate, and it took longer than one stream alone.
  CHECK(b.decode_busy_seconds >= kStreams * tokens / kFour * (1 - 1e-9));
  CHECK(b.decode_busy_seconds > tokens / kOne);
  CHECK(b.decode_stream_seconds / b.decode_busy_seconds > 2);
  CHECK(wall >= 0.95 * kStreams * tokens / kFour);
}

TEST_CASE("simulated time is off by default: no simulated timing, /metrics says so") {
  Harness h;
  RecordingTools tools;
  h.Attempt(tools, Task(AideRule()));
  const auto requests = h.server->requests();
  REQUIRE(requests.size() == 2);
  for (const RecordedRequest& r : requests) {
    CHECK_FALSE(r.simulated);
    CHECK(r.prompt_tokens > 0);
  }
  const ServingMetrics m = h.server->Metrics();
  CHECK(m.requests == 2);
  CHECK_FALSE(m.simulated);
  CHECK_THAT(SummaryLine(m), Contains("no simulated model time (answers are instant)"));
  httplib::Client http("127.0.0.1", h.server->port());
  auto metrics = http.Get("/metrics");
  REQUIRE(metrics);
  CHECK_THAT(metrics->body, Contains("\ntemper_scripted_simulated 0\n") && !Contains("seconds_total"));
}

TEST_CASE("simulated: stopping the server ends the requests waiting for their tokens at once") {
  Harness h({}, Simulated({{1, 1}}));  // one token a second: the write_file turn would take ~12 minutes
  std::optional<Result<ChatResponse>> reply;
  std::thread client([&] {
    const RolePrompt prompt = WithoutReferenceFix(h.worker.BuildPrompt(Task(SyncookiesRule())));
    reply = h.client->Chat(prompt.request, nullptr);
  });
  for (int i = 0; i < 500; ++i) {
    if (h.server->Metrics().simulated->batch.jobs > 0) break;
    std::this_thread::sleep_for(10ms);
  }
  REQUIRE(h.server->Metrics().simulated->batch.jobs == 1);
  const auto start = std::chrono::steady_clock::now();
  h.server.reset();
  CHECK(SecondsSince(start) < 60);
  client.join();
  REQUIRE(reply);
  CHECK_FALSE(reply->ok());
}

TEST_CASE("simulated without pacing: answers come at once, each request accounted as if it ran alone") {
  ScriptedModelOptions options = Simulated({{1, 1}, {2, 2}}, 100);  // paced, these attempts would take ~2 minutes
  options.pacing = Pacing::kNone;
  Harness h({}, options);
  const auto start = std::chrono::steady_clock::now();
  RecordingTools tools;
  h.Attempt(tools, Task(SyncookiesRule()));
  // Overlapping requests are still each alone. Each attempt has its own tools (RecordingTools is
  // not thread-safe; sharing one corrupted its vector now and then) and is checked here, not in
  // its thread, where Catch's assertions are not safe.
  RecordingTools overlapping_tools[2];
  std::optional<Result<WorkerResult>> overlapping[2];
  std::vector<std::thread> threads;
  for (int i = 0; i < 2; ++i) {
    threads.emplace_back([&, i] { overlapping[i] = h.worker.Run(*h.client, overlapping_tools[i], Task(AideRule())); });
  }
  for (std::thread& t : threads) t.join();
  for (const auto& attempt : overlapping) REQUIRE((attempt && attempt->ok()));
  CHECK(SecondsSince(start) < 60);

  const auto requests = h.server->requests();
  REQUIRE(requests.size() == 6);
  double busy = 0;
  for (const RecordedRequest& r : requests) {
    REQUIRE(r.simulated);
    CHECK(r.simulated->decode_s == Approx(r.completion_tokens / 1.0));
    CHECK(r.simulated->prefill_s == Approx((r.prompt_tokens - r.simulated->cached_prompt_tokens) / 100.0));
    CHECK(r.simulated->queue_s == 0);
    busy += r.simulated->prefill_s + r.simulated->decode_s;
  }
  CHECK(requests[1].simulated->cached_prompt_tokens > 0);  // the prefix cache works as when paced
  const ServingMetrics m = h.server->Metrics();
  REQUIRE(m.simulated);
  CHECK(m.simulated->batch.busy_seconds == Approx(busy));
  CHECK(busy > 100);
  CHECK(m.simulated->batch.max_batch == 1);
  CHECK_THAT(SummaryLine(m), Contains("simulated model time (not paced: each request alone): busy "));
  CHECK_THAT(scripted::PrometheusText(m), Contains("\ntemper_scripted_paced 0\n"));
}
