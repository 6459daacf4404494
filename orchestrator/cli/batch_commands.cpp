// temper submit | list | status | cancel | rebooted
#include <cstdio>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "orchestrator/budgets.h"
#include "orchestrator/cli/batch_file.h"
#include "orchestrator/cli/commands.h"
#include "orchestrator/cli/event_render.h"
#include "orchestrator/cli/render.h"
#include "orchestrator/cli/whole_reads.h"
#include "orchestrator/config/waivers.h"
#include "orchestrator/config/yaml_reader.h"
#include "orchestrator/journal_event_types.h"
#include "orchestrator/proto_convert.h"

namespace temper::cli {

namespace {

void Print(const std::string& text) { std::fwrite(text.data(), 1, text.size(), stdout); }

}  // namespace

void AddSubmitCommand(CLI::App& app, CommandContext& ctx) {
  struct Options {
    std::string file, target, host, datastream, profile, name, request_id;
    std::vector<std::string> rules;
    bool whole_profile = false;
    uint32_t max_attempts = 0, max_tokens_k = 0, parallel_attempts = 0;
    std::string wall_time;
    std::vector<std::string> waive;
    bool allow_disruptive = false, plan_only = false;
    bool json = false;
  };
  auto opt = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("submit", "submit a batch of STIG rules for remediation");
  cmd->add_option("-f,--file", opt->file, "batch YAML file (flags override its fields)");
  cmd->add_option("-t,--target", opt->target, "target name from temperd.yaml");
  cmd->add_option("--host", opt->host,
                  "an SSH host, user@name[:port], instead of --target (accept its key first: temper hosts accept)");
  cmd->add_option("-d,--datastream", opt->datastream,
                  "SCAP datastream: a file name in one of temperd's content_dirs, or an absolute path inside one");
  cmd->add_option("-p,--profile", opt->profile, "profile id or name (e.g. stig)");
  cmd->add_option("-r,--rule", opt->rules, "rule id or name; repeat for several");
  cmd->add_flag("--whole-profile", opt->whole_profile, "remediate every rule the profile selects");
  cmd->add_flag("--plan-only", opt->plan_only,
                "run the loop, then revert everything: report what would change and which rules could be fixed");
  cmd->add_option("--parallel-attempts", opt->parallel_attempts,
                  "attempts at once, each on its own fork of a root file system target (default: temperd's "
                  "loop.parallel_attempts); an SSH host runs one at a time")
      ->check(CLI::Range(1u, kMaxParallelAttempts));
  cmd->add_option("--max-attempts", opt->max_attempts, "attempts per rule");
  cmd->add_option("--wall-time", opt->wall_time, "wall time per rule (e.g. 20m)");
  cmd->add_option("--max-ktokens", opt->max_tokens_k, "thousands of tokens per rule");
  cmd->add_option("--name", opt->name, "a label for people");
  cmd->add_option("--request-id", opt->request_id, "idempotency key: re-submitting it returns the same batch");
  cmd->add_option("--waive", opt->waive,
                  "RULE:REASON:OWNER[:YYYY-MM-DD]: keep RULE out of remediation, reported as waived (never as "
                  "pass), until that day (UTC); repeat for several; replaces the batch file's or temperd.yaml's "
                  "waiver for RULE");
  cmd->add_flag("--allow-disruptive", opt->allow_disruptive,
                "also remediate disruptive rules (FIPS mode, usbguard, fapolicyd, noexec/nosuid mounts, package "
                "removal, kernel modules, boot settings, fixes that need a reboot); without it they are held");
  cmd->add_flag("--json", opt->json, "print the batch as JSON");
  cmd->callback([&ctx, opt] {
    ctx.run = [&ctx, opt]() -> Status {
      temper::v1::SubmitBatchRequest request;
      if (!opt->file.empty()) {
        TEMPER_ASSIGN_OR_RETURN(request, LoadBatchFile(opt->file));
      }
      if (!opt->target.empty()) request.set_target(opt->target);
      if (!opt->host.empty()) {
        request.set_host(opt->host);
        request.clear_target();
      }
      if (!opt->datastream.empty()) request.set_datastream(opt->datastream);
      if (!opt->profile.empty()) request.set_profile(opt->profile);
      if (!opt->name.empty()) request.set_name(opt->name);
      if (!opt->request_id.empty()) request.set_request_id(opt->request_id);
      if (!opt->rules.empty()) {
        request.clear_rule_ids();
        for (const std::string& r : opt->rules) request.add_rule_ids(r);
      }
      if (opt->whole_profile) request.set_whole_profile(true);
      if (opt->max_attempts != 0) request.mutable_budgets()->set_max_attempts(opt->max_attempts);
      if (opt->max_tokens_k != 0) request.mutable_budgets()->set_max_tokens(uint64_t{opt->max_tokens_k} * 1000);
      if (!opt->wall_time.empty()) {
        Result<std::chrono::seconds> wall = ParseDuration(opt->wall_time);
        if (!wall.ok()) return wall.status().WithContext("--wall-time");
        request.mutable_budgets()->set_wall_time_seconds(static_cast<uint32_t>(wall->count()));
      }
      for (const std::string& spec : opt->waive) {
        TEMPER_ASSIGN_OR_RETURN(Waiver waiver, ParseWaiverFlag(spec));
        auto* waivers = request.mutable_waivers();
        for (int i = 0; i < waivers->size(); ++i) {
          if ((*waivers)[i].rule_id() == waiver.rule_id) {  // both normalized (waivers.h)
            waivers->DeleteSubrange(i, 1);
            break;
          }
        }
        ToProto(waiver, request.add_waivers());
      }
      if (opt->allow_disruptive) request.set_allow_disruptive(true);
      if (opt->plan_only) request.set_plan_only(true);
      if (opt->parallel_attempts != 0) request.set_parallel_attempts(opt->parallel_attempts);
      TEMPER_ASSIGN_OR_RETURN(Connection conn, Connection::Open(ctx.connection));
      temper::v1::Batch batch;
      grpc::Status status = conn.stub().SubmitBatch(conn.NewContext().get(), request, &batch);
      if (!status.ok()) return conn.Explain(status);
      if (opt->json) {
        Print(RenderJson(batch));
      } else {
        uint32_t rules = batch.counts().total();
        Print(fmt::format("batch {} {}: {} on target {} (profile {})\n", batch.id(), StateName(batch.state()),
                          batch.whole_profile() ? "every rule of the profile"
                                                : fmt::format("{} rule{}", rules, rules == 1 ? "" : "s"),
                          batch.target(), batch.profile()));
        std::string options = OptionsLine(batch);
        if (!options.empty()) Print("  " + options + "\n");
      }
      // On stderr, so it is seen even when a script keeps stdout (the id) for itself.
      if (!batch.waiting_reason().empty()) {
        std::fprintf(stderr, "temper: batch %s is waiting: %s\n", batch.id().c_str(), batch.waiting_reason().c_str());
      }
      return Status::OK();
    };
  });
}

void AddListCommand(CLI::App& app, CommandContext& ctx) {
  struct Options {
    uint32_t limit = 50;
    std::string page_token;
    std::vector<std::string> states;
    bool json = false;
  };
  auto opt = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("list", "list batches, newest first");
  cmd->add_option("-n,--limit", opt->limit, "batches per page")->capture_default_str();
  cmd->add_option("--page-token", opt->page_token, "continue a previous listing");
  cmd->add_option("--state", opt->states, "only these states (queued, running, completed, cancelled, failed)");
  cmd->add_flag("--json", opt->json, "print the response as JSON");
  cmd->callback([&ctx, opt] {
    ctx.run = [&ctx, opt]() -> Status {
      temper::v1::ListBatchesRequest request;
      request.set_page_size(opt->limit);
      request.set_page_token(opt->page_token);
      for (const std::string& s : opt->states) {
        temper::v1::BatchState state;
        std::string upper = "BATCH_STATE_";
        for (char c : s) upper += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
        if (!temper::v1::BatchState_Parse(upper, &state) || state == temper::v1::BATCH_STATE_UNSPECIFIED) {
          return Status::InvalidArgument(
              fmt::format("--state: '{}' is not a batch state (queued, running, completed, cancelled, failed)", s));
        }
        request.add_states(state);
      }
      TEMPER_ASSIGN_OR_RETURN(Connection conn, Connection::Open(ctx.connection));
      temper::v1::ListBatchesResponse response;
      grpc::Status status = conn.stub().ListBatches(conn.NewContext().get(), request, &response);
      if (!status.ok()) return conn.Explain(status);
      Print(opt->json ? RenderJson(response) : RenderBatchTable(response));
      return Status::OK();
    };
  });
}

void AddStatusCommand(CLI::App& app, CommandContext& ctx) {
  struct Options {
    std::string batch;
    bool json = false;
  };
  auto opt = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("status", "show one batch and its rules");
  cmd->add_option("batch", opt->batch, "batch id")->required();
  cmd->add_flag("--json", opt->json, "print the batch as JSON");
  cmd->callback([&ctx, opt] {
    ctx.run = [&ctx, opt]() -> Status {
      TEMPER_ASSIGN_OR_RETURN(Connection conn, Connection::Open(ctx.connection));
      TEMPER_ASSIGN_OR_RETURN(temper::v1::Batch batch, ReadBatch(conn, opt->batch));
      Print(opt->json ? RenderJson(batch) : RenderBatchDetail(batch));
      return Status::OK();
    };
  });
}

void AddCancelCommand(CLI::App& app, CommandContext& ctx) {
  struct Options {
    std::string batch, reason;
  };
  auto opt = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("cancel", "cancel a queued or running batch");
  cmd->add_option("batch", opt->batch, "batch id")->required();
  cmd->add_option("--reason", opt->reason, "recorded in the journal");
  cmd->callback([&ctx, opt] {
    ctx.run = [&ctx, opt]() -> Status {
      TEMPER_ASSIGN_OR_RETURN(Connection conn, Connection::Open(ctx.connection));
      temper::v1::CancelBatchRequest request;
      request.set_batch_id(opt->batch);
      request.set_reason(opt->reason);
      temper::v1::Batch batch;
      grpc::Status status = conn.stub().CancelBatch(conn.NewContext().get(), request, &batch);
      if (!status.ok()) return conn.Explain(status);
      Print(fmt::format("batch {} cancelled ({} rules cancelled)\n", batch.id(), batch.counts().cancelled()));
      return Status::OK();
    };
  });
}

void AddRebootedCommand(CLI::App& app, CommandContext& ctx) {
  struct Options {
    std::string batch, note;
    bool no_wait = false;
    int wait_seconds = 1800;
  };
  auto opt = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "rebooted", "the host rebooted: verify the batch's reboot_pending rules (pass → fixed, else escalated)");
  cmd->add_option("batch", opt->batch, "batch id")->required();
  cmd->add_option("--note", opt->note, "recorded in the journal (who rebooted, a ticket)");
  cmd->add_flag("--no-wait", opt->no_wait, "return once the reboot is recorded; the verification follows");
  cmd->add_option("--wait", opt->wait_seconds, "seconds to wait for the verification")->capture_default_str();
  cmd->callback([&ctx, opt] {
    ctx.run = [&ctx, opt]() -> Status {
      TEMPER_ASSIGN_OR_RETURN(Connection conn, Connection::Open(ctx.connection));
      temper::v1::ConfirmRebootRequest request;
      request.set_batch_id(opt->batch);
      request.set_note(opt->note);
      temper::v1::ConfirmRebootResponse response;
      grpc::Status status = conn.stub().ConfirmReboot(conn.NewContext().get(), request, &response);
      if (!status.ok()) return conn.Explain(status);
      const uint64_t seq = response.confirmed_seq();
      Print(fmt::format("batch {}: reboot confirmed (journal seq {}); {} rule{} to verify on target {}\n",
                        response.batch().id(), seq, response.batch().counts().reboot_pending(),
                        response.batch().counts().reboot_pending() == 1 ? "" : "s", response.batch().target()));
      if (opt->no_wait) return Status::OK();
      // The verification runs on the target's thread, after the batch running there: follow the
      // journal from the confirmation to its outcome.
      temper::v1::WatchJournalRequest watch;
      watch.set_batch_id(opt->batch);
      watch.set_after_seq(seq);
      watch.set_follow(true);
      std::unique_ptr<grpc::ClientContext> context = conn.NewContext(/*with_deadline=*/false);
      context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(opt->wait_seconds));
      auto reader = conn.stub().WatchJournal(context.get(), watch);
      temper::v1::JournalEvent event;
      std::optional<EventType> outcome;
      std::string error;
      while (!outcome && reader->Read(&event)) {
        const std::optional<EventType> type = ParseEventType(event.type());
        if (!type) continue;
        // The verification's events: each rule's (fixed or escalated), then how it ended.
        if (SpecOf(*type).rule_state) Print(RenderEvent(event));
        if (type == EventType::kRebootVerified || type == EventType::kRebootVerificationFailed) {
          Print(RenderEvent(event));
          outcome = type;
          nlohmann::json data = nlohmann::json::parse(event.data_json(), nullptr, /*allow_exceptions=*/false);
          if (data.is_object() && data.contains("error") && data["error"].is_string()) {
            error = data["error"].get<std::string>();
          }
        }
      }
      context->TryCancel();
      if (!outcome) {
        return Status::DeadlineExceeded(fmt::format(
            "no verification within {} s (it runs once target {} is free); follow it with `temper watch {} --after {}`",
            opt->wait_seconds, response.batch().target(), opt->batch, seq));
      }
      if (outcome == EventType::kRebootVerificationFailed) {
        return Status::Unavailable(
            fmt::format("batch {}: the verification failed: {}; the rules stay reboot_pending", opt->batch, error));
      }
      return Status::OK();
    };
  });
}

}  // namespace temper::cli
