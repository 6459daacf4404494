// temper apply BATCH --host H [--host H ...] [--at-once N] [--wait]: a batch's kept fixes onto a
// fleet, one batch per host (ApplyBatch).
#include <chrono>
#include <cstdio>
#include <memory>
#include <thread>

#include <fmt/format.h>

#include "orchestrator/cli/commands.h"
#include "orchestrator/cli/render.h"

namespace temper::cli {

namespace {

void Print(const std::string& text) { std::fwrite(text.data(), 1, text.size(), stdout); }

bool Ended(const temper::v1::Batch& b) {
  return b.state() == temper::v1::BATCH_STATE_COMPLETED || b.state() == temper::v1::BATCH_STATE_FAILED ||
         b.state() == temper::v1::BATCH_STATE_CANCELLED;
}

// One host's line: its batch, state and what happened to the rules there.
std::string HostLine(const temper::v1::Batch& b) {
  const temper::v1::RuleCounts& c = b.counts();
  std::string line = fmt::format("{:<24} batch {:<6} {:<10}", b.target(), b.id(), StateName(b.state()));
  if (Ended(b) || b.state() == temper::v1::BATCH_STATE_RUNNING) {
    line += fmt::format(" {} fixed, {} passing already, {} refused or failing", c.fixed(), c.already_passing(),
                        c.escalated() + c.error());
    if (c.skipped() != 0) line += fmt::format(", {} skipped", c.skipped());
  }
  if (!b.error().empty()) line += ": " + b.error();
  return line + "\n";
}

}  // namespace

void AddApplyCommand(CLI::App& app, CommandContext& ctx) {
  struct Options {
    std::string batch, name;
    std::vector<std::string> hosts, targets;
    uint32_t at_once = 0;
    bool wait = false, json = false;
  };
  auto opt = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "apply",
      "replay a batch's kept fixes (made on a twin: temper twin create) onto SSH hosts, one batch per host; "
      "each host checks every file for drift, keeps its undo journal, and is verified with OpenSCAP");
  cmd->add_option("batch", opt->batch, "the batch whose kept fixes to apply")->required();
  cmd->add_option("--host", opt->hosts, "an SSH host, user@name[:port]; repeat for several");
  cmd->add_option("-t,--target", opt->targets, "a target by name (a known host, a rootfs target); repeat");
  cmd->add_option("--at-once", opt->at_once, "hosts changed at the same time (default: all, at most 16)")
      ->check(CLI::Range(1u, 64u));
  cmd->add_option("--name", opt->name, "a label for people (default: apply of batch N)");
  cmd->add_flag("--wait", opt->wait,
                "wait until every host's batch has ended and print each host's result; exit status 3 when a host's "
                "batch failed");
  cmd->add_flag("--json", opt->json, "print the batches as JSON");
  cmd->callback([&ctx, opt] {
    ctx.run = [&ctx, opt]() -> Status {
      if (opt->hosts.empty() && opt->targets.empty()) {
        return Status::InvalidArgument("apply: name at least one --host (or --target) to apply batch " + opt->batch +
                                       " to");
      }
      temper::v1::ApplyBatchRequest request;
      request.set_batch_id(opt->batch);
      for (const std::string& h : opt->hosts) request.add_hosts(h);
      for (const std::string& t : opt->targets) request.add_targets(t);
      request.set_at_once(opt->at_once);
      request.set_name(opt->name);
      TEMPER_ASSIGN_OR_RETURN(Connection conn, Connection::Open(ctx.connection));
      temper::v1::ApplyBatchResponse response;
      grpc::Status status = conn.stub().ApplyBatch(conn.NewContext().get(), request, &response);
      if (!status.ok()) return conn.Explain(status);
      std::vector<temper::v1::Batch> batches(response.batches().begin(), response.batches().end());
      if (!opt->json) {
        Print(fmt::format("batch {}'s fixes go to {} target{}, {} at once:\n", opt->batch, batches.size(),
                          batches.size() == 1 ? "" : "s", batches.empty() ? 0 : batches.front().at_once()));
        for (const temper::v1::Batch& b : batches) Print("  " + HostLine(b));
      }
      if (opt->wait) {
        // Each host's batch is read whole once it has ended; until then a light poll.
        for (temper::v1::Batch& b : batches) {
          while (!Ended(b)) {
            std::this_thread::sleep_for(std::chrono::seconds(1));
            temper::v1::GetBatchRequest get;
            get.set_batch_id(b.id());
            grpc::Status read = conn.stub().GetBatch(conn.NewContext().get(), get, &b);
            if (!read.ok()) return conn.Explain(read).WithContext("batch " + get.batch_id());
          }
        }
        if (!opt->json) {
          Print("results (temper report BATCH for each host's rules):\n");
          for (const temper::v1::Batch& b : batches) Print("  " + HostLine(b));
        }
        for (const temper::v1::Batch& b : batches) {
          if (b.state() != temper::v1::BATCH_STATE_COMPLETED) ctx.exit_status = kExitBatchFailed;
        }
      }
      if (opt->json) {
        temper::v1::ApplyBatchResponse out;
        for (const temper::v1::Batch& b : batches) *out.add_batches() = b;
        Print(RenderJson(out));
      }
      return Status::OK();
    };
  });
}

}  // namespace temper::cli
