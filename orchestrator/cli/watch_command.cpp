// temper watch [BATCH]: follows the journal live, from the start or from a seq.
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <thread>

#include <fmt/format.h>

#include "orchestrator/cli/commands.h"
#include "orchestrator/cli/render.h"

namespace temper::cli {

void AddWatchCommand(CLI::App& app, CommandContext& ctx) {
  struct Options {
    std::string batch;
    uint64_t after = 0;
    bool no_follow = false;
    bool json = false;
    bool reconnect = false;
  };
  auto opt = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("watch", "follow the journal live (one batch, or all)");
  cmd->add_option("batch", opt->batch, "batch id; all batches when omitted");
  cmd->add_option("--after", opt->after, "start after this seq (resume where you left off)");
  cmd->add_flag("--no-follow", opt->no_follow, "print the stored events and exit");
  cmd->add_flag("--json", opt->json, "print raw events, one JSON object per line");
  cmd->add_flag("--reconnect", opt->reconnect, "when temperd restarts, wait for it and resume");
  cmd->callback([&ctx, opt] {
    ctx.run = [&ctx, opt]() -> Status {
      TEMPER_ASSIGN_OR_RETURN(Connection conn, Connection::Open(ctx.connection));
      uint64_t cursor = opt->after;
      while (true) {
        temper::v1::WatchJournalRequest request;
        request.set_batch_id(opt->batch);
        request.set_after_seq(cursor);
        request.set_follow(!opt->no_follow);
        std::unique_ptr<grpc::ClientContext> context = conn.NewContext(/*with_deadline=*/false);
        auto reader = conn.stub().WatchJournal(context.get(), request);
        temper::v1::JournalEvent event;
        while (reader->Read(&event)) {
          std::string line = opt->json ? RenderEventJson(event) : RenderEvent(event);
          std::fwrite(line.data(), 1, line.size(), stdout);
          std::fflush(stdout);
          cursor = event.seq();
        }
        grpc::Status status = reader->Finish();
        if (status.ok()) return Status::OK();
        if (status.error_code() != grpc::StatusCode::UNAVAILABLE || !opt->reconnect) {
          Status explained = conn.Explain(status);
          return explained.WithContext(fmt::format("watch stopped after seq {} (resume with --after {})", cursor, cursor));
        }
        std::fprintf(stderr, "temper: temperd went away; reconnecting from seq %llu\n",
                     static_cast<unsigned long long>(cursor));
        std::this_thread::sleep_for(std::chrono::seconds(1));
      }
    };
  });
}

}  // namespace temper::cli
