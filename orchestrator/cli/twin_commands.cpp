// temper twin create NAME --from-host HOST | twin list [--json] | twin remove NAME
#include <chrono>
#include <cstdio>
#include <memory>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "orchestrator/cli/commands.h"
#include "orchestrator/cli/render.h"

namespace temper::cli {

namespace {

void Print(const std::string& text) { std::fwrite(text.data(), 1, text.size(), stdout); }

std::string Size(uint64_t bytes) {
  if (bytes >= (uint64_t{1} << 30)) return fmt::format("{:.1f} GiB", static_cast<double>(bytes) / (1 << 30));
  return fmt::format("{:.1f} MiB", static_cast<double>(bytes) / (1 << 20));
}

std::string Describe(const temper::v1::Twin& t) {
  return fmt::format(
      "twin {} from {} ({}): {} in {} files, {} packages, {:.0f} s; {} device nodes or FIFOs not copied\n"
      "left out: {}\n"
      "its batches: temper submit -t {} ...\n",
      t.name(), t.host(), t.os_release().empty() ? "unknown OS" : t.os_release(), Size(t.bytes()), t.files(),
      t.packages(), t.seconds(), t.skipped_special_files(),
      t.excluded_size() == 0 ? std::string("nothing") : fmt::format("{}", fmt::join(t.excluded(), ", ")), t.name());
}

std::string RenderTwinTable(const temper::v1::ListTwinsResponse& list) {
  if (list.twins_size() == 0) return "no twins (temper twin create NAME --from-host user@name)\n";
  std::vector<std::vector<std::string>> rows = {{"NAME", "SOURCE", "OS", "COPIED", "SIZE", "FILES", "PACKAGES"}};
  for (const auto& t : list.twins()) {
    rows.push_back({t.name(), t.host(), t.os_release().empty() ? "-" : t.os_release(), FormatTime(t.copied_at()),
                    Size(t.bytes()), std::to_string(t.files()), std::to_string(t.packages())});
  }
  return Table(rows);
}

}  // namespace

void AddTwinCommand(CLI::App& app, CommandContext& ctx) {
  struct Options {
    bool json = false;
    std::string name, host;
    int create_timeout_minutes = 180;
  };
  auto opt = std::make_shared<Options>();
  CLI::App* twin = app.add_subcommand(
      "twin", "twins: copies of SSH hosts' root file systems, as rootfs targets to rehearse batches on");
  twin->require_subcommand(1);

  CLI::App* create = twin->add_subcommand("create", "copy an SSH host's / into a new twin (admin; takes minutes)");
  create->add_option("name", opt->name, "the twin's name, and its target's (a-z, 0-9, '.', '_', '-')")->required();
  create->add_option("--from-host", opt->host, "the host: user@name[:port], or an SSH host target's name")->required();
  create->add_option("--timeout-minutes", opt->create_timeout_minutes, "how long to wait for the copy (default 180)")
      ->check(CLI::Range(1, 24 * 60));
  create->add_flag("--json", opt->json, "print the response as JSON");
  create->callback([&ctx, opt] {
    ctx.run = [&ctx, opt]() -> Status {
      TEMPER_ASSIGN_OR_RETURN(Connection conn, Connection::Open(ctx.connection));
      temper::v1::CreateTwinRequest request;
      request.set_name(opt->name);
      request.set_host(opt->host);
      // The copy runs within the call: a large host takes minutes, far past the usual deadline.
      std::unique_ptr<grpc::ClientContext> context = conn.NewContext(/*with_deadline=*/false);
      context->set_deadline(std::chrono::system_clock::now() + std::chrono::minutes(opt->create_timeout_minutes));
      temper::v1::Twin response;
      grpc::Status status = conn.stub().CreateTwin(context.get(), request, &response);
      if (!status.ok()) return conn.Explain(status);
      Print(opt->json ? RenderJson(response) + "\n" : Describe(response));
      return Status::OK();
    };
  });

  CLI::App* list = twin->add_subcommand("list", "list the twins with their source host and packages");
  list->add_flag("--json", opt->json, "print the response as JSON");
  list->callback([&ctx, opt] {
    ctx.run = [&ctx, opt]() -> Status {
      TEMPER_ASSIGN_OR_RETURN(Connection conn, Connection::Open(ctx.connection));
      temper::v1::ListTwinsResponse all;
      std::string token;
      do {
        temper::v1::ListTwinsRequest request;
        request.set_page_token(token);
        temper::v1::ListTwinsResponse page;
        grpc::Status status = conn.stub().ListTwins(conn.NewContext().get(), request, &page);
        if (!status.ok()) return conn.Explain(status);
        for (auto& t : *page.mutable_twins()) *all.add_twins() = std::move(t);
        token = page.next_page_token();
      } while (!token.empty());
      Print(opt->json ? RenderJson(all) + "\n" : RenderTwinTable(all));
      return Status::OK();
    };
  });

  CLI::App* remove = twin->add_subcommand("remove", "delete a twin and its files (admin)");
  remove->add_option("name", opt->name, "the twin")->required();
  remove->add_flag("--json", opt->json, "print the response as JSON");
  remove->callback([&ctx, opt] {
    ctx.run = [&ctx, opt]() -> Status {
      TEMPER_ASSIGN_OR_RETURN(Connection conn, Connection::Open(ctx.connection));
      temper::v1::RemoveTwinRequest request;
      request.set_name(opt->name);
      temper::v1::Twin response;
      grpc::Status status = conn.stub().RemoveTwin(conn.NewContext().get(), request, &response);
      if (!status.ok()) return conn.Explain(status);
      Print(opt->json ? RenderJson(response) + "\n" : fmt::format("twin {} removed\n", response.name()));
      return Status::OK();
    };
  });
}

}  // namespace temper::cli
