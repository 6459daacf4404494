// The Architect and Reflector: prompts within budget with the memory that matters kept, and their
// answers parsed from realistic outputs (tests/data/roles/answers/), with mistakes explained.
#include "roles/architect.h"

#include <fstream>
#include <sstream>

#include <catch2/catch.hpp>

#include "engine/constrain/json_schema_grammar.h"

#include "roles/reflector.h"

using namespace temper;

namespace {

std::string Answer(const std::string& name) {
  std::ifstream in(std::string(TEMPER_TEST_DATA_DIR) + "/roles/answers/" + name);
  REQUIRE(in);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

ChatResponse Reply(const std::string& name) {
  ChatResponse r;
  r.text = Answer(name);
  return r;
}

RuleInfo SshRule() {
  return {"xccdf_org.ssgproject.content_rule_sshd_disable_root_login",
          "Disable SSH Root Login",
          "medium",
          "The root user should never be allowed to login to a system directly over a network.",
          "Disallowing root logins through SSH requires administrators to authenticate using their own account.",
          "Run: sshd -T | grep -i permitrootlogin. The output must be 'permitrootlogin no'.",
          "Set PermitRootLogin no in /etc/ssh/sshd_config.",
          {"SV-257947r925915_rule", "CCI-000770"}};
}

RuleInfo PartitionRule() {
  return {"xccdf_org.ssgproject.content_rule_partition_for_var_log",
          "Ensure /var/log Located On Separate Partition",
          "low",
          "",
          "",
          "",
          "",
          {}};
}

RoleConfig Config(uint32_t context, uint32_t out) {
  RoleConfig c;
  c.role = "architect";
  c.context_tokens = context;
  c.max_output_tokens = out;
  return c;
}

ArchitectInput Input() {
  ArchitectInput in;
  in.batch = {.total = 3, .passed = 1, .failed = 0, .recent_events = {"accounts_tmout passed on attempt 1"}};
  in.candidates = {SshRule(), PartitionRule()};
  in.lessons = {
      {"xccdf_org.ssgproject.content_rule_sshd_disable_root_login", "Drop-ins win over sshd_config.", 0.9, true},
      {"xccdf_org.ssgproject.content_rule_sshd_set_idle_timeout", std::string(3000, 'x'), 0.2, false}};
  return in;
}

TEST_CASE("the Architect's requests carry the JSON schemas of its answers", "[roles][architect]") {
  const std::vector<RuleInfo> candidates = {{.id = "xccdf_org.ssgproject.content_rule_accounts_tmout"}};
  auto pick = engine::JsonSchemaGrammar(PickSchema(candidates));
  REQUIRE(pick.ok());
  auto matches = [](const engine::Grammar& g, std::string_view text) {
    engine::GrammarState s = engine::GrammarState::Start(g);
    for (char c : text) s = s.Advance(g, static_cast<uint8_t>(c));
    return s.Complete();
  };
  CHECK(matches(
      *pick,
      R"({"decision": "attempt", "rule_id": "xccdf_org.ssgproject.content_rule_accounts_tmout", "approach": "x"})"));
  CHECK(matches(*pick,
                R"({"decision":"skip","rule_id":"xccdf_org.ssgproject.content_rule_accounts_tmout","reason":"y"})"));
  CHECK_FALSE(
      matches(*pick, R"({"decision":"attempt","rule_id":"xccdf_org.ssgproject.content_rule_other","approach":"x"})"));
  CHECK_FALSE(matches(
      *pick, R"({"decision":"attempt","rule_id":"xccdf_org.ssgproject.content_rule_accounts_tmout","reason":"x"})"));
  auto reengage = engine::JsonSchemaGrammar(ReengageSchema());
  REQUIRE(reengage.ok());
  CHECK(matches(*reengage, R"({"verdict": "PIVOT", "reasoning": "r", "plan": "p"})"));
  CHECK(matches(*reengage, R"({"verdict": "ESCALATE", "reasoning": "r"})"));
  CHECK_FALSE(matches(*reengage, R"({"verdict": "PIVOT", "reasoning": "r"})"));  // a pivot needs its plan
}

}  // namespace

TEST_CASE("the embedded prompts hold every role and reject unknown placeholders") {
  PromptLibrary lib = PromptLibrary::Embedded();
  for (const std::string& name : PromptLibrary::RequiredNames()) {
    auto text = name == "worker" ? lib.Render(name, {{"max_steps", "20"}, {"max_tokens", "30000"}}) : lib.Render(name);
    INFO(name);
    REQUIRE(text.ok());
    CHECK(text->size() > 200);
  }
  auto missing = lib.Render("worker");
  REQUIRE_FALSE(missing.ok());
  CHECK_THAT(missing.status().message(), Catch::Contains("{{max_steps}}, which has no value"));
  auto unknown = lib.Render("architekt");
  REQUIRE_FALSE(unknown.ok());
  CHECK_THAT(unknown.status().message(), Catch::Contains("did you mean 'architect'"));
  auto dir = PromptLibrary::LoadDir(std::string(TEMPER_SOURCE_DIR) + "/roles/prompts");
  REQUIRE(dir.ok());
  CHECK(*dir->Render("reflector") == *lib.Render("reflector"));
  auto nodir = PromptLibrary::LoadDir("/nonexistent");
  REQUIRE_FALSE(nodir.ok());
  CHECK_THAT(nodir.status().message(), Catch::Contains("/nonexistent/architect.md"));
}

TEST_CASE("the pick prompt fits the budget and keeps this rule's lessons before similar rules'") {
  PromptLibrary lib = PromptLibrary::Embedded();
  BytesTokenEstimator est;
  Architect big(lib, Config(16384, 2048), est);
  auto p = big.BuildPick(Input());
  REQUIRE(p.ok());
  CHECK(p->trimmed.empty());
  REQUIRE(p->request.messages.size() == 2);
  CHECK(p->request.role_name == "architect");
  CHECK(p->request.answer_schema == PickSchema(Input().candidates));
  CHECK(p->request.max_tokens == 2048);
  const std::string& user = p->request.messages[1].content;
  CHECK_THAT(user, Catch::Contains("Drop-ins win over sshd_config."));
  // One line a candidate: the rule's details are the Worker's, not the Architect's.
  CHECK_THAT(user, Catch::Contains("- xccdf_org.ssgproject.content_rule_sshd_disable_root_login (medium): Disable SSH "
                                   "Root Login\n"));
  CHECK_THAT(user, Catch::Contains("- xccdf_org.ssgproject.content_rule_partition_for_var_log (low): Ensure /var/log "
                                   "Located On Separate Partition | no reference fix\n"));
  CHECK_THAT(user, !Catch::Contains("sshd -T | grep -i permitrootlogin"));
  CHECK_THAT(user, !Catch::Contains("SV-257947r925915_rule"));

  // A small window: the long low-utility lesson from a similar rule goes first, and is reported.
  Architect small(lib, Config(1900, 512), est);
  auto q = small.BuildPick(Input());
  REQUIRE(q.ok());
  size_t total = 0;
  for (const ChatMessage& m : q->request.messages) total += est.Count(m.content) + kPerMessageOverheadTokens;
  CHECK(total <= 1900 - 512);
  REQUIRE_FALSE(q->trimmed.empty());
  CHECK_THAT(q->trimmed[0].name, Catch::Contains("sshd_set_idle_timeout"));
  CHECK_THAT(q->request.messages[1].content, Catch::Contains("Drop-ins win over sshd_config."));

  Architect tiny(lib, Config(600, 512), est);
  auto r = tiny.BuildPick(Input());
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == StatusCode::kResourceExhausted);
}

TEST_CASE("the pick prompt starts with what does not change and ends with the batch's progress") {
  PromptLibrary lib = PromptLibrary::Embedded();
  BytesTokenEstimator est;
  Architect architect(lib, Config(16384, 2048), est);
  ArchitectInput in = Input();
  in.candidates[0].risk = "disruption medium, needs a reboot";
  in.attempts_so_far[in.candidates[0].id] = 2;
  auto p = architect.BuildPick(in);
  REQUIRE(p.ok());
  const std::string& user = p->request.messages[1].content;
  CHECK(user.rfind("## Candidate rules\n", 0) == 0);
  CHECK_THAT(user, Catch::Contains("Disable SSH Root Login | risk: disruption medium, needs a reboot | 2 earlier "
                                   "attempts\n"));
  const size_t batch = user.find("## Batch\n");
  REQUIRE(batch != std::string::npos);
  CHECK(user.find("## Lesson", batch) == std::string::npos);
  CHECK(user.find("accounts_tmout passed on attempt 1") > batch);

  // Two picks of one batch whose progress moved on share everything up to the progress.
  ArchitectInput later = in;
  later.batch.passed = 2;
  later.batch.recent_events.push_back("sshd_disable_root_login passed on attempt 1");
  auto q = architect.BuildPick(later);
  REQUIRE(q.ok());
  const std::string& next = q->request.messages[1].content;
  CHECK(next.substr(0, batch) == user.substr(0, batch));
}

TEST_CASE("pick answers: attempt through thinking and fences, skip, and explained mistakes") {
  PromptLibrary lib = PromptLibrary::Embedded();
  BytesTokenEstimator est;
  Architect a(lib, Config(16384, 2048), est);
  auto attempt = a.ParsePick(Reply("architect_attempt_fenced.txt"), Input());
  REQUIRE(attempt.ok());
  CHECK(attempt->kind == ArchitectPick::Kind::kAttempt);
  CHECK(attempt->rule_id == SshRule().id);
  CHECK_THAT(attempt->approach, Catch::Contains("00-stig.conf"));
  auto skip = a.ParsePick(Reply("architect_skip.txt"), Input());
  REQUIRE(skip.ok());
  CHECK(skip->kind == ArchitectPick::Kind::kSkip);
  CHECK_THAT(skip->reason, Catch::Contains("repartitioning"));
  auto typo = a.ParsePick(Reply("architect_typo_id.txt"), Input());
  REQUIRE_FALSE(typo.ok());
  CHECK_THAT(typo.status().message(),
             Catch::Contains("did you mean 'xccdf_org.ssgproject.content_rule_sshd_disable_root_login'"));
  auto cut = a.ParsePick(Reply("architect_truncated.txt"), Input());
  REQUIRE_FALSE(cut.ok());
  CHECK_THAT(cut.status().message(), Catch::Contains("never closes"));
}

TEST_CASE("re-engagement: PIVOT needs a plan, and prose is never read as CONTINUE") {
  PromptLibrary lib = PromptLibrary::Embedded();
  BytesTokenEstimator est;
  Architect a(lib, Config(16384, 2048), est);
  std::vector<PastAttempt> attempts = {
      {1, "sed sshd_config", "sed -i ...", "fail", "permitrootlogin yes", "drop-ins win"},
      {2, "sed again", "", "fail", "permitrootlogin yes", ""}};
  auto p = a.BuildReengage(SshRule(), "Edit sshd_config", attempts, {});
  REQUIRE(p.ok());
  CHECK_THAT(p->request.messages[1].content, Catch::Contains("## Attempt 2 — fail"));
  CHECK_THAT(p->request.messages[1].content, Catch::Contains("Edit sshd_config"));
  auto pivot = a.ParseReengage(Reply("reengage_pivot.txt"));
  REQUIRE(pivot.ok());
  CHECK(pivot->verdict == ReengageVerdict::kPivot);
  CHECK_THAT(pivot->plan, Catch::Contains("00-stig.conf"));
  auto no_plan = a.ParseReengage(Reply("reengage_pivot_no_plan.txt"));
  REQUIRE_FALSE(no_plan.ok());
  CHECK_THAT(no_plan.status().message(), Catch::Contains("\"plan\""));
  auto prose = a.ParseReengage(Reply("reengage_prose_only.txt"));
  REQUIRE_FALSE(prose.ok());
  CHECK(prose.status().code() == StatusCode::kInvalidArgument);
}

TEST_CASE("the Reflector keeps the failed attempt's evidence and checks its lesson") {
  PromptLibrary lib = PromptLibrary::Embedded();
  BytesTokenEstimator est;
  RoleConfig c = Config(4096, 1024);
  c.role = "reflector";
  Reflector r(lib, c, est);
  PastAttempt failed{3,
                     "sed on sshd_config",
                     std::string(20000, 'a') + "\n",
                     "fail",
                     "oval:ssg-test_sshd_permitrootlogin:tst:1 false: PermitRootLogin yes in 50-cloud-init.conf",
                     ""};
  auto p = r.Build(SshRule(), failed, {}, {});
  REQUIRE(p.ok());
  CHECK(p->request.answer_schema == ReflectionSchema());
  auto reflection = engine::JsonSchemaGrammar(ReflectionSchema());
  REQUIRE(reflection.ok());
  engine::GrammarState state = engine::GrammarState::Start(*reflection);
  for (char ch : std::string_view(R"({"tried": "sed", "why_failed": "a drop-in wins", "next": "edit the drop-in", )"
                                  R"("never": ["sed on sshd_config"], "lesson": "Check sshd_config.d first."})")) {
    state = state.Advance(*reflection, static_cast<uint8_t>(ch));
  }
  CHECK(state.Complete());
  const std::string& user = p->request.messages[1].content;
  CHECK_THAT(user, Catch::Contains("50-cloud-init.conf"));  // evidence outranks the long action log
  REQUIRE(p->trimmed.size() == 1);
  CHECK(p->trimmed[0].name == "worker actions");
  auto good = r.Parse(Reply("reflection_good.txt"));
  REQUIRE(good.ok());
  CHECK_THAT(good->why_failed, Catch::Contains("50-cloud-init.conf"));
  REQUIRE(good->never.size() == 1);
  CHECK(good->lesson.size() <= Reflector::kMaxLessonChars);
  auto long_lesson = r.Parse(Reply("reflection_long_lesson.txt"));
  REQUIRE_FALSE(long_lesson.ok());
  CHECK_THAT(long_lesson.status().message(), Catch::Contains("at most 200"));
}

// What the real Gemma 3 270M answered (bench/history/issue-47-reference-models-and-real-model.md): the prompts' example
// answers with their placeholders. Such a lesson would reach the episodic memory; it is an unusable answer.
TEST_CASE("answers that copy the prompt's placeholders are refused, naming the field") {
  PromptLibrary lib = PromptLibrary::Embedded();
  BytesTokenEstimator est;
  RoleConfig c = Config(4096, 1024);
  c.role = "reflector";
  Reflector r(lib, c, est);
  ChatResponse copied;
  copied.text = R"({"tried": "sed on sshd_config", "why_failed": "a drop-in wins", "next": "<what to try next>",
    "lesson": " <one sentence, at most 200 characters, for memory> "})";
  auto reflection = r.Parse(copied);
  REQUIRE_FALSE(reflection.ok());
  CHECK(reflection.status().code() == StatusCode::kInvalidArgument);
  CHECK_THAT(reflection.status().message(), Catch::Contains("\"next\" is <what to try next>, a placeholder"));
  // Angle brackets inside real text are not placeholders.
  ChatResponse real;
  real.text = R"({"tried": "edit <sshd_config>", "why_failed": "<a> and <b> differ", "next": "use 00-stig.conf",
    "lesson": "<Match> blocks override the global value"})";
  CHECK(r.Parse(real).ok());

  Architect a(lib, Config(16384, 2048), est);
  ChatResponse pick;
  pick.text = R"({"decision": "attempt", "rule_id": "xccdf_org.ssgproject.content_rule_sshd_disable_root_login",
    "approach": "<plan for the Worker>"})";
  auto parsed = a.ParsePick(pick, Input());
  REQUIRE_FALSE(parsed.ok());
  CHECK_THAT(parsed.status().message(), Catch::Contains("\"approach\" is <plan for the Worker>, a placeholder"));
}
