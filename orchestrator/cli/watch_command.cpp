// temper watch [BATCH]: follows the journal live, from the start or from a seq. For people, each
// event is one short line and every batch has a progress line (watch_progress.h); --json prints the
// raw events only, one object per line, for scripts. With BATCH it ends when the batch does, its
// exit status the batch's outcome, so a script can wait on it; without, it follows every batch.
#include <sys/ioctl.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "orchestrator/cli/commands.h"
#include "orchestrator/cli/event_render.h"
#include "orchestrator/cli/render.h"
#include "orchestrator/cli/watch_progress.h"
#include "orchestrator/cli/whole_reads.h"
#include "orchestrator/journal_event_types.h"

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

// One event for people: its line, above the progress lines the board keeps.
void ShowEvent(Connection& conn, ProgressBoard& board, bool tty, const temper::v1::JournalEvent& event) {
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

// The exit status `temper watch BATCH` ends with once the batch has ended in `state`
// (commands.h); nullopt while it may still run.
std::optional<int> ExitStatusOf(temper::v1::BatchState state) {
  switch (state) {
    case temper::v1::BATCH_STATE_COMPLETED:
      return kExitCompleted;
    case temper::v1::BATCH_STATE_FAILED:
      return kExitBatchFailed;
    case temper::v1::BATCH_STATE_CANCELLED:
      return kExitBatchCancelled;
    default:
      return std::nullopt;
  }
}

// The same for the event that ends a batch; nullopt for every other event.
std::optional<int> ExitStatusAt(const temper::v1::JournalEvent& event) {
  const std::optional<EventType> type = ParseEventType(event.type());
  if (type == EventType::kBatchCompleted) return kExitCompleted;
  if (type == EventType::kBatchFailed) return kExitBatchFailed;
  if (type == EventType::kBatchCancelled) return kExitBatchCancelled;
  return std::nullopt;
}

}  // namespace

void AddWatchCommand(CLI::App& app, CommandContext& ctx) {
  struct Options {
    std::string batch;
    uint64_t after = 0;
    bool no_follow = false;
    bool follow_forever = false;
    bool json = false;
    bool reconnect = false;
  };
  auto opt = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "watch", "follow the journal live, with a progress line per batch: one batch until it ends, or all");
  cmd->add_option("batch", opt->batch, "batch id; all batches when omitted");
  cmd->add_option("--after", opt->after, "start after this seq (resume where you left off)");
  CLI::Option* no_follow = cmd->add_flag("--no-follow", opt->no_follow, "print the stored events and exit (status 0)");
  cmd->add_flag("--follow-forever", opt->follow_forever,
                "with BATCH: keep following after the batch ended (its reverts, reboot checks), until interrupted")
      ->excludes(no_follow);
  cmd->add_flag("--json", opt->json, "print raw events, one JSON object per line (no progress lines)");
  cmd->add_flag("--reconnect", opt->reconnect, "when temperd restarts, wait for it and resume");
  cmd->footer(
      "With BATCH, watch exits once the batch has ended; its exit status is the batch's outcome: 0 completed "
      "(every rule reached a final state: fixed, escalated, ...; see `temper report`), 3 failed (the batch "
      "could not run), 4 cancelled; 1 when temperd refused or could not be reached. A batch that already "
      "ended prints its events and exits at once. Without BATCH it follows every batch until interrupted.\n\n"
      "Progress: [#####-----] done/total  fixed · already (passing before) · failed (the evaluator could not "
      "decide) · escalated · skipped (· reboot pending · waived · held · manual, when any) · left  ▸ current rule "
      "(role). On a terminal the progress lines are "
      "redrawn under the events; otherwise a batch's line is printed when its counts change.");
  cmd->callback([&ctx, opt] {
    ctx.run = [&ctx, opt]() -> Status {
      TEMPER_ASSIGN_OR_RETURN(Connection conn, Connection::Open(ctx.connection));
      bool tty = ::isatty(STDOUT_FILENO) == 1;
      ProgressBoard board(tty, tty ? TerminalWidth() : 0);
      const bool until_end = !opt->batch.empty() && !opt->no_follow && !opt->follow_forever;
      bool follow = !opt->no_follow;
      std::optional<int> ended;  // the exit status, once the batch is seen to have ended
      // Resuming one batch mid-way: the events before --after are not replayed, so the counts so far
      // come from the batch itself. From seq 0 the events tell the whole story.
      const bool seed = !opt->json && !opt->batch.empty() && opt->after > 0;
      if (seed || until_end) {
        TEMPER_ASSIGN_OR_RETURN(temper::v1::Batch batch, ReadBatch(conn, opt->batch));
        // A batch that cannot start yet (a daemon without models) keeps the watch waiting: say why.
        if (!batch.waiting_reason().empty()) {
          std::fprintf(stderr, "temper: batch %s is waiting: %s\n", batch.id().c_str(), batch.waiting_reason().c_str());
        }
        if (seed) {
          board.Seed(batch);
          Write(board.Refresh());
        }
        // Already over: its stored events are all there is to wait for (none, with --after past its end).
        if (until_end) ended = ExitStatusOf(batch.state());
        if (ended) follow = false;
      }
      uint64_t cursor = opt->after;
      while (true) {
        temper::v1::WatchJournalRequest request;
        request.set_batch_id(opt->batch);
        request.set_after_seq(cursor);
        request.set_follow(follow);
        std::unique_ptr<grpc::ClientContext> context = conn.NewContext(/*with_deadline=*/false);
        auto reader = conn.stub().WatchJournal(context.get(), request);
        temper::v1::JournalEvent event;
        while (reader->Read(&event)) {
          cursor = event.seq();
          const std::optional<int> end = until_end ? ExitStatusAt(event) : std::nullopt;
          if (end) ended = end;
          if (opt->json) {
            Write(RenderEventJson(event));
          } else {
            ShowEvent(conn, board, tty, event);
          }
          if (end) break;
        }
        if (ended) {
          context->TryCancel();  // the stream may still be open, following: nothing more is wanted
          reader->Finish();
          Write(board.Finish());
          ctx.exit_status = *ended;
          return Status::OK();
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
