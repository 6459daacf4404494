// temper report BATCH: what a batch did, for people (text, Markdown) or scripts (JSON), and with
// --results-to a copy of OpenSCAP's own results files.
#include <cstdio>
#include <memory>

#include <fmt/format.h>

#include "orchestrator/cli/commands.h"
#include "orchestrator/cli/render.h"
#include "orchestrator/cli/report_render.h"
#include "orchestrator/cli/results_files.h"
#include "orchestrator/cli/whole_reads.h"

namespace temper::cli {

void AddReportCommand(CLI::App& app, CommandContext& ctx) {
  struct Options {
    std::string batch;
    std::string format = "text";
    std::string results_to;
  };
  auto opt = std::make_shared<Options>();
  CLI::App* cmd =
      app.add_subcommand("report",
                         "what a batch did: per rule the verdicts before and after, attempts, tokens, the commands "
                         "that fixed it, lessons and why rules were escalated or skipped");
  cmd->add_option("batch", opt->batch, "batch id")->required();
  cmd->add_option("--format", opt->format, "text (for a terminal), markdown (for a ticket or PR) or json")
      ->check(CLI::IsMember({"text", "markdown", "json"}))
      ->capture_default_str();
  cmd->add_option("--results-to", opt->results_to,
                  "copy OpenSCAP's results.xml and arf.xml of the batch's last evaluation into this directory "
                  "(read where temperd wrote them, so run this on temperd's host)");
  cmd->footer(kReportJsonFields);
  cmd->callback([&ctx, opt] {
    ctx.run = [&ctx, opt]() -> Status {
      TEMPER_ASSIGN_OR_RETURN(Connection conn, Connection::Open(ctx.connection));
      TEMPER_ASSIGN_OR_RETURN(temper::v1::BatchReport report, ReadBatchReport(conn, opt->batch));
      // Copy first: when the files cannot be had, the command fails before printing half its work.
      std::vector<std::string> copied;
      if (!opt->results_to.empty()) {
        if (report.results_dir().empty()) {
          return Status::FailedPrecondition(
              fmt::format("--results-to: batch {} has no results files yet (they are written when the batch completes; "
                          "it is {})",
                          report.batch().id(), StateName(report.batch().state())));
        }
        Result<std::vector<std::string>> written = CopyResultsFiles(report.results_dir(), opt->results_to);
        if (!written.ok()) return written.status().WithContext("--results-to");
        copied = std::move(*written);
      }
      std::string out = opt->format == "json"       ? RenderReportJson(report)
                        : opt->format == "markdown" ? RenderReportMarkdown(report)
                                                    : RenderReportText(report);
      std::fwrite(out.data(), 1, out.size(), stdout);
      // On stderr, so that stdout stays one JSON object or one document.
      for (const std::string& path : copied) std::fprintf(stderr, "temper: wrote %s\n", path.c_str());
      return Status::OK();
    };
  });
}

}  // namespace temper::cli
