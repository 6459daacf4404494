// temper watch [BATCH]: follows the journal live, from the start or from a seq. For people, each
// event is one short line and every batch has a progress line (watch_progress.h); --json prints the
// raw events only, one object per line, for scripts.
#include <sys/ioctl.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <thread>

#include <fmt/format.h>

#include "orchestrator/cli/commands.h"
#include "orchestrator/cli/event_render.h"
#include "orchestrator/cli/render.h"
#include "orchestrator/cli/watch_progress.h"
#include "orchestrator/cli/whole_reads.h"

namespace temper::cli {

namespace {

void Write(const std::string& text) {
  if (text.empty()) return;
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
}

// Columns of the terminal on stdout, read again for each event so a resized window is followed;
// 0 when unknown.
size_t TerminalWidth() {
  struct winsize ws {};
  if (::ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) != 0) return 0;
  return ws.ws_col;
}

}  // namespace

void AddWatchCommand(CLI::App& app, CommandContext& ctx) {
  struct Options {
    std::string batch;
    uint64_t after = 0;
    bool no_follow = false;
    bool json = false;
    bool reconnect = false;
  };
  auto opt = std::make_shared<Options>();
  CLI::App* cmd =
      app.add_subcommand("watch", "follow the journal live (one batch, or all), with a progress line per batch");
  cmd->add_option("batch", opt->batch, "batch id; all batches when omitted");
  cmd->add_option("--after", opt->after, "start after this seq (resume where you left off)");
  cmd->add_flag("--no-follow", opt->no_follow, "print the stored events and exit");
  cmd->add_flag("--json", opt->json, "print raw events, one JSON object per line (no progress lines)");
  cmd->add_flag("--reconnect", opt->reconnect, "when temperd restarts, wait for it and resume");
  cmd->footer(
      "Progress: [#####-----] done/total  fixed · already (passing before) · failed (the evaluator could not "
      "decide) · escalated · skipped (· reboot pending · waived · held · manual, when any) · left  ▸ current rule "
      "(role). On a terminal the progress lines are "
      "redrawn under the events; otherwise a batch's line is printed when its counts change.");
  cmd->callback([&ctx, opt] {
    ctx.run = [&ctx, opt]() -> Status {
      TEMPER_ASSIGN_OR_RETURN(Connection conn, Connection::Open(ctx.connection));
      bool tty = ::isatty(STDOUT_FILENO) == 1;
      ProgressBoard board(tty, tty ? TerminalWidth() : 0);
      // Resuming one batch mid-way: the events before --after are not replayed, so the counts so far
      // come from the batch itself. From seq 0 the events tell the whole story.
      if (!opt->json && !opt->batch.empty() && opt->after > 0) {
        TEMPER_ASSIGN_OR_RETURN(temper::v1::Batch batch, ReadBatch(conn, opt->batch));
        board.Seed(batch);
        Write(board.Refresh());
      }
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
          cursor = event.seq();
          if (opt->json) {
            Write(RenderEventJson(event));
            continue;
          }
          if (board.WantsSeed(event)) {
            Result<temper::v1::Batch> batch = ReadBatch(conn, event.batch_id());
            // Without it the progress counts from the events seen, which is still right from here on.
            if (batch.ok()) {
              board.Seed(*batch);
            } else {
              Write(board.Clear());
              std::fprintf(stderr, "temper: batch %s: progress counts only the events from here (%s)\n",
                           event.batch_id().c_str(), batch.status().message().c_str());
            }
          }
          if (tty) board.set_width(TerminalWidth());
          Write(board.Show(event, RenderEvent(event)));
        }
        grpc::Status status = reader->Finish();
        Write(board.Finish());
        if (status.ok()) return Status::OK();
        if (status.error_code() != grpc::StatusCode::UNAVAILABLE || !opt->reconnect) {
          Status explained = conn.Explain(status);
          return explained.WithContext(
              fmt::format("watch stopped after seq {} (resume with --after {})", cursor, cursor));
        }
        std::fprintf(stderr, "temper: temperd went away; reconnecting from seq %llu\n",
                     static_cast<unsigned long long>(cursor));
        std::this_thread::sleep_for(std::chrono::seconds(1));
      }
    };
  });
}

}  // namespace temper::cli
