// temper revert BATCH [RULE]: take a batch's changes, or one rule's, back out of its target.
#include <chrono>
#include <cstdio>
#include <memory>

#include <fmt/format.h>

#include "orchestrator/cli/commands.h"
#include "orchestrator/cli/render.h"
#include "orchestrator/cli/whole_reads.h"

namespace temper::cli {

namespace {

// A revert ends with an OpenSCAP evaluation of the batch's rules: a whole profile takes minutes.
constexpr auto kRevertDeadline = std::chrono::minutes(15);

std::string Names(const google::protobuf::RepeatedPtrField<std::string>& ids) {
  std::string out;
  for (const std::string& id : ids) out += (out.empty() ? "" : ", ") + ShortRuleName(id);
  return out;
}

std::string RenderRevert(const temper::v1::RevertBatchResponse& r, bool one_rule) {
  const temper::v1::Batch& b = r.batch();
  std::string out;
  if (one_rule) {
    std::string snapshots;
    for (uint32_t s : r.dropped_snapshots()) snapshots += (snapshots.empty() ? "" : ", ") + std::to_string(s);
    out += fmt::format("batch {}: reverted rule {} (snapshot{} {} taken out of target {})\n", b.id(),
                       Names(r.reverted_rules()), r.dropped_snapshots_size() == 1 ? "" : "s", snapshots, b.target());
  } else {
    out += fmt::format("batch {}: reverted; target {} is back at snapshot {}, where the batch started\n", b.id(),
                       b.target(), r.restored_snapshot());
    out += fmt::format("  fixes taken out: {}\n",
                       r.reverted_rules().empty() ? "none (the batch had kept no fix)" : Names(r.reverted_rules()));
  }
  // The fresh verdicts of the rules the revert evaluated.
  std::vector<std::vector<std::string>> rows = {{"  RULE", "STATE", "BEFORE", "NOW"}};
  for (const temper::v1::BatchRule& rule : b.rules()) {
    if (one_rule && rule.state() != temper::v1::RULE_STATE_REVERTED && rule.state() != temper::v1::RULE_STATE_FIXED &&
        rule.state() != temper::v1::RULE_STATE_ALREADY_PASSING) {
      continue;
    }
    rows.push_back({"  " + ShortRuleName(rule.rule_id()), StateName(rule.state()),
                    rule.before_verdict().empty() ? "-" : rule.before_verdict(),
                    rule.after_verdict().empty() ? "-" : rule.after_verdict()});
  }
  out += Table(rows);
  if (!r.now_failing().empty()) {
    out += fmt::format("  now failing (passed before the revert): {}\n", Names(r.now_failing()));
  }
  if (!r.results_dir().empty()) out += fmt::format("  OpenSCAP results: {}\n", r.results_dir());
  return out;
}

}  // namespace

void AddRevertCommand(CLI::App& app, CommandContext& ctx) {
  struct Options {
    std::string batch, rule;
    bool json = false;
  };
  auto opt = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "revert",
      "take a batch's changes back out of its target, or only one rule's fix (later fixes stay), then "
      "re-evaluate; refused while a batch runs on the target, and when a later batch or fix sits on top "
      "(revert those first: reverse order)");
  cmd->add_option("batch", opt->batch, "batch id")->required();
  cmd->add_option("rule", opt->rule, "rule id or name; without it, the whole batch");
  cmd->add_flag("--json", opt->json, "print the response as JSON");
  cmd->callback([&ctx, opt] {
    ctx.run = [&ctx, opt]() -> Status {
      TEMPER_ASSIGN_OR_RETURN(Connection conn, Connection::Open(ctx.connection));
      temper::v1::RevertBatchRequest request;
      request.set_batch_id(opt->batch);
      request.set_rule_id(opt->rule);
      temper::v1::RevertBatchResponse response;
      std::unique_ptr<grpc::ClientContext> call = conn.NewContext(/*with_deadline=*/false);
      call->set_deadline(std::chrono::system_clock::now() + kRevertDeadline);
      grpc::Status status = conn.stub().RevertBatch(call.get(), request, &response);
      if (!status.ok()) return conn.Explain(status);
      TEMPER_RETURN_IF_ERROR(ReadRemainingRules(conn, *response.mutable_batch()));
      std::string out = opt->json ? RenderJson(response) : RenderRevert(response, !opt->rule.empty());
      std::fwrite(out.data(), 1, out.size(), stdout);
      return Status::OK();
    };
  });
}

}  // namespace temper::cli
