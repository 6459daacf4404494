// temper submit | list | status | cancel
#include <cstdio>
#include <memory>

#include <fmt/format.h>

#include "orchestrator/cli/batch_file.h"
#include "orchestrator/cli/commands.h"
#include "orchestrator/cli/render.h"
#include "orchestrator/yaml_reader.h"

namespace temper::cli {

namespace {

void Print(const std::string& text) { std::fwrite(text.data(), 1, text.size(), stdout); }

}  // namespace

void AddSubmitCommand(CLI::App& app, CommandContext& ctx) {
  struct Options {
    std::string file, target, datastream, profile, name, request_id;
    std::vector<std::string> rules;
    bool whole_profile = false;
    bool plan_only = false;
    uint32_t max_attempts = 0, max_tokens_k = 0;
    std::string wall_time;
    bool json = false;
  };
  auto opt = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("submit", "submit a batch of STIG rules for remediation");
  cmd->add_option("-f,--file", opt->file, "batch YAML file (flags override its fields)");
  cmd->add_option("-t,--target", opt->target, "target name from temperd.yaml");
  cmd->add_option("-d,--datastream", opt->datastream, "SCAP datastream file name or absolute path");
  cmd->add_option("-p,--profile", opt->profile, "profile id or name (e.g. stig)");
  cmd->add_option("-r,--rule", opt->rules, "rule id or name; repeat for several");
  cmd->add_flag("--whole-profile", opt->whole_profile, "remediate every rule the profile selects");
  cmd->add_flag("--plan-only", opt->plan_only,
                "run the loop, then revert everything: report what would change and which rules could be fixed");
  cmd->add_option("--max-attempts", opt->max_attempts, "attempts per rule");
  cmd->add_option("--wall-time", opt->wall_time, "wall time per rule (e.g. 20m)");
  cmd->add_option("--max-ktokens", opt->max_tokens_k, "thousands of tokens per rule");
  cmd->add_option("--name", opt->name, "a label for people");
  cmd->add_option("--request-id", opt->request_id, "idempotency key: re-submitting it returns the same batch");
  cmd->add_flag("--json", opt->json, "print the batch as JSON");
  cmd->callback([&ctx, opt] {
    ctx.run = [&ctx, opt]() -> Status {
      temper::v1::SubmitBatchRequest request;
      if (!opt->file.empty()) {
        TEMPER_ASSIGN_OR_RETURN(request, LoadBatchFile(opt->file));
      }
      if (!opt->target.empty()) request.set_target(opt->target);
      if (!opt->datastream.empty()) request.set_datastream(opt->datastream);
      if (!opt->profile.empty()) request.set_profile(opt->profile);
      if (!opt->name.empty()) request.set_name(opt->name);
      if (!opt->request_id.empty()) request.set_request_id(opt->request_id);
      if (!opt->rules.empty()) {
        request.clear_rule_ids();
        for (const std::string& r : opt->rules) request.add_rule_ids(r);
      }
      if (opt->whole_profile) request.set_whole_profile(true);
      if (opt->plan_only) request.set_plan_only(true);
      if (opt->max_attempts != 0) request.mutable_budgets()->set_max_attempts(opt->max_attempts);
      if (opt->max_tokens_k != 0) request.mutable_budgets()->set_max_tokens(uint64_t{opt->max_tokens_k} * 1000);
      if (!opt->wall_time.empty()) {
        Result<std::chrono::seconds> wall = ParseDuration(opt->wall_time);
        if (!wall.ok()) return wall.status().WithContext("--wall-time");
        request.mutable_budgets()->set_wall_time_seconds(static_cast<uint32_t>(wall->count()));
      }
      TEMPER_ASSIGN_OR_RETURN(Connection conn, Connection::Open(ctx.connection));
      temper::v1::Batch batch;
      grpc::Status status = conn.stub().SubmitBatch(conn.NewContext().get(), request, &batch);
      if (!status.ok()) return conn.Explain(status);
      if (opt->json) {
        Print(RenderJson(batch));
      } else {
        uint32_t rules = batch.counts().total();
        Print(fmt::format("batch {} {}: {} on target {} (profile {})\n", batch.id(), StateName(batch.state()),
                          batch.whole_profile() ? "every rule of the profile" : fmt::format("{} rule{}", rules, rules == 1 ? "" : "s"),
                          batch.target(), batch.profile()));
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
          return Status::InvalidArgument(fmt::format(
              "--state: '{}' is not a batch state (queued, running, completed, cancelled, failed)", s));
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
      temper::v1::GetBatchRequest request;
      request.set_batch_id(opt->batch);
      temper::v1::Batch batch;
      grpc::Status status = conn.stub().GetBatch(conn.NewContext().get(), request, &batch);
      if (!status.ok()) return conn.Explain(status);
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

}  // namespace temper::cli
