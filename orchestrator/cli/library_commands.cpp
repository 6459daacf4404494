// temper library [list] [--rule R] [--all] [--json] | library show ID [--json]
//   | library export [-o FILE] [--rule R] [--all] | library retire ID --reason TEXT
// The library of proven fixes: what temper has fixed before, on which platform, and how often
// reusing it worked since.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/display_text.h"
#include "orchestrator/cli/commands.h"
#include "orchestrator/cli/render.h"

namespace temper::cli {

namespace {

void Print(const std::string& text) { std::fwrite(text.data(), 1, text.size(), stdout); }

// Every entry, following the pages.
Result<temper::v1::ListFixesResponse> ReadFixes(Connection& conn, const std::string& rule_id, bool include_retired) {
  temper::v1::ListFixesResponse all;
  temper::v1::ListFixesRequest request;
  request.set_rule_id(rule_id);
  request.set_include_retired(include_retired);
  request.set_page_size(1000);
  while (true) {
    temper::v1::ListFixesResponse page;
    grpc::Status status = conn.stub().ListFixes(conn.NewContext().get(), request, &page);
    if (!status.ok()) return conn.Explain(status);
    for (auto& fix : *page.mutable_fixes()) *all.add_fixes() = std::move(fix);
    if (page.next_page_token().empty()) return all;
    request.set_page_token(page.next_page_token());
  }
}

std::string EntryState(const temper::v1::Fix& fix) {
  return fix.has_retired_at() ? "retired " + FormatTime(fix.retired_at()) : "live";
}

std::string RenderFixTable(const temper::v1::ListFixesResponse& list, bool include_retired) {
  if (list.fixes_size() == 0) {
    return include_retired ? "the library is empty: no kept fix has been recorded yet\n"
                           : "no live entries (temper library list --all shows retired ones)\n";
  }
  std::vector<std::vector<std::string>> rows = {
      {"ID", "RULE", "PLATFORM", "CONTENT", "USES", "FAILURES", "TOKENS SAVED", "FROM", "CREATED", "STATE"}};
  uint64_t uses = 0, tokens_saved = 0;
  for (const auto& f : list.fixes()) {
    uses += f.uses();
    tokens_saved += f.tokens_saved();
    rows.push_back({f.id(), ShortRuleName(f.rule_id()), f.platform_label(), f.content_id(), std::to_string(f.uses()),
                    std::to_string(f.failures()), std::to_string(f.tokens_saved()),
                    fmt::format("batch {} on {}", f.source_batch_id(), f.source_target()), FormatTime(f.created_at()),
                    EntryState(f)});
  }
  const int entries = list.fixes_size();
  return Table(rows) + fmt::format("{} entr{}, {} reuse{} kept, {} model tokens saved\n", entries,
                                   entries == 1 ? "y" : "ies", uses, uses == 1 ? "" : "s", tokens_saved);
}

std::string Mode(uint32_t mode) { return fmt::format("{:04o}", mode); }

// "file 0644 sha256 ab12…" or "-" for nothing at the path.
std::string FileSide(const std::string& type, uint32_t mode, const std::string& sha256) {
  if (type.empty()) return "-";
  std::string out = type + " " + Mode(mode);
  if (!sha256.empty()) out += " sha256 " + sha256;
  return out;
}

std::string RenderFixDetail(const temper::v1::Fix& f) {
  std::string out = fmt::format("library entry {}: {}\n", f.id(), f.rule_id());
  out += fmt::format("  content:      {}\n", f.content_id());
  out += fmt::format("  platform:     {}\n", f.platform_label());
  out += fmt::format("  proven by:    batch {} on {}, attempt {}, {}\n", f.source_batch_id(), f.source_target(),
                     f.source_attempt_id(), FormatTime(f.created_at()));
  out += fmt::format("  state:        {}{}\n", EntryState(f),
                     f.retired_reason().empty() ? "" : ": " + OneLine(f.retired_reason(), 200));
  out += fmt::format("  reused:       {} kept, {} failed; {} model tokens saved ({} to find it)\n", f.uses(),
                     f.failures(), f.tokens_saved(), f.model_tokens());
  if (!f.last_failure().empty()) out += fmt::format("  last failure: {}\n", OneLine(f.last_failure(), 200));
  if (!f.packages().empty()) {
    std::vector<std::string> names;
    for (const auto& [name, version] : f.packages()) names.push_back(name + " " + version);
    std::sort(names.begin(), names.end());
    out += fmt::format("  depends on:   {}\n", fmt::join(names, ", "));
  }
  out += fmt::format("files ({}):\n", f.files_size() + f.files_left_out());
  for (const auto& file : f.files()) {
    out += fmt::format("  {}\n", file.path());
    out += fmt::format("    before: {}\n", file.package().empty()
                                               ? FileSide(file.before_type(), file.before_mode(), file.before_sha256())
                                               : "from package " + file.package());
    out += fmt::format("    after:  {}\n", file.after_type().empty()
                                               ? "deleted"
                                               : FileSide(file.after_type(), file.after_mode(), file.after_sha256()));
  }
  if (f.files_left_out() > 0) {
    out += fmt::format("  ... and {} more (temper library export has them all)\n", f.files_left_out());
  }
  auto list = [&out](std::string_view what, const google::protobuf::RepeatedPtrField<std::string>& items) {
    if (!items.empty()) out += fmt::format("{}: {}\n", what, fmt::join(items, ", "));
  };
  list("packages installed", f.packages_installed());
  list("packages removed", f.packages_removed());
  list("packages upgraded", f.packages_upgraded());
  list("services enabled", f.services_enabled());
  list("services disabled", f.services_disabled());
  list("services masked", f.services_masked());
  list("services unmasked", f.services_unmasked());
  out += "evidence:\n";
  out += f.evidence().empty() ? "  (none recorded)\n" : f.evidence() + (f.evidence().back() == '\n' ? "" : "\n");
  return out;
}

// Receives ExportFixes into `output` ("-": stdout). A file is written as "<output>.part" while the
// chunks arrive and renamed once they all did, so an export cut short never leaves half a file under
// the name asked for.
Status ReceiveExport(Connection& conn, const temper::v1::ExportFixesRequest& request, const std::string& output) {
  auto context = conn.NewContext(/*with_deadline=*/false);
  auto reader = conn.stub().ExportFixes(context.get(), request);
  const bool to_stdout = output == "-";
  const std::string part = output + ".part";
  std::ofstream file;
  if (!to_stdout) {
    file.open(part, std::ios::binary | std::ios::trunc);
    if (!file) return Status::IOError(fmt::format("-o: cannot create {}", part));
  }
  auto discard = [&] {
    if (to_stdout) return;
    file.close();
    std::error_code ec;
    std::filesystem::remove(part, ec);
  };
  uint64_t received = 0, total = 0;
  bool first = true;
  temper::v1::ExportChunk chunk;
  while (reader->Read(&chunk)) {
    if (first) {
      total = chunk.total_bytes();
      first = false;
    }
    if (chunk.offset() != received) {
      discard();
      return Status::DataLoss(fmt::format("temperd sent bytes at offset {} after {} bytes", chunk.offset(), received));
    }
    if (to_stdout) {
      std::fwrite(chunk.data().data(), 1, chunk.data().size(), stdout);
    } else {
      file.write(chunk.data().data(), static_cast<std::streamsize>(chunk.data().size()));
    }
    received += chunk.data().size();
  }
  grpc::Status status = reader->Finish();
  if (!status.ok()) {
    discard();
    return conn.Explain(status);
  }
  if (first || received != total) {
    discard();
    return Status::DataLoss(fmt::format("the library export ended after {} of {} bytes", received, total));
  }
  if (to_stdout) return Status::OK();
  file.close();
  if (!file) {
    discard();
    return Status::IOError(fmt::format("-o: writing {} failed", part));
  }
  std::error_code ec;
  std::filesystem::rename(part, output, ec);
  if (ec) {
    discard();
    return Status::IOError(fmt::format("-o: cannot rename {} to {}: {}", part, output, ec.message()));
  }
  std::fprintf(stderr, "temper: wrote %s (%llu bytes)\n", output.c_str(), static_cast<unsigned long long>(received));
  return Status::OK();
}

}  // namespace

void AddLibraryCommand(CLI::App& app, CommandContext& ctx) {
  struct Options {
    bool json = false;
    bool all = false;
    std::string rule, id, reason, output = "-";
  };
  auto opt = std::make_shared<Options>();
  CLI::App* library = app.add_subcommand(
      "library", "the library of proven fixes: kept fixes temper reuses, with no model call, on matching targets");
  auto list = [&ctx, opt]() -> Status {
    TEMPER_ASSIGN_OR_RETURN(Connection conn, Connection::Open(ctx.connection));
    TEMPER_ASSIGN_OR_RETURN(temper::v1::ListFixesResponse response, ReadFixes(conn, opt->rule, opt->all));
    Print(opt->json ? RenderJson(response) : RenderFixTable(response, opt->all));
    return Status::OK();
  };
  library->callback([&ctx, list, library] {
    if (library->get_subcommands().empty()) ctx.run = list;
  });
  for (CLI::App* cmd : {library, library->add_subcommand("list", "list the library's entries, newest first")}) {
    cmd->add_option("--rule", opt->rule, "only this rule's entries (its full XCCDF id)");
    cmd->add_flag("--all", opt->all, "retired entries too");
    cmd->add_flag("--json", opt->json, "print the response as JSON");
    if (cmd != library) cmd->callback([&ctx, list] { ctx.run = list; });
  }

  CLI::App* show = library->add_subcommand(
      "show", "one entry: its rule, content, platform, files before and after, packages, evidence and reuses");
  show->add_option("id", opt->id, "the entry's id (temper library list)")->required();
  show->add_flag("--json", opt->json, "print the response as JSON");
  show->callback([&ctx, opt] {
    ctx.run = [&ctx, opt]() -> Status {
      TEMPER_ASSIGN_OR_RETURN(Connection conn, Connection::Open(ctx.connection));
      temper::v1::GetFixRequest request;
      request.set_fix_id(opt->id);
      temper::v1::Fix response;
      grpc::Status status = conn.stub().GetFix(conn.NewContext().get(), request, &response);
      if (!status.ok()) return conn.Explain(status);
      Print(opt->json ? RenderJson(response) : RenderFixDetail(response));
      return Status::OK();
    };
  });

  CLI::App* exported = library->add_subcommand(
      "export", "the entries whole as JSON, their bundles (every file's bytes before and after) included");
  exported->add_option("-o,--output", opt->output, "file to write; default \"-\": stdout");
  exported->add_option("--rule", opt->rule, "only this rule's entries (its full XCCDF id)");
  exported->add_flag("--all", opt->all, "retired entries too");
  exported->callback([&ctx, opt] {
    ctx.run = [&ctx, opt]() -> Status {
      TEMPER_ASSIGN_OR_RETURN(Connection conn, Connection::Open(ctx.connection));
      temper::v1::ExportFixesRequest request;
      request.set_rule_id(opt->rule);
      request.set_include_retired(opt->all);
      return ReceiveExport(conn, request, opt->output);
    };
  });

  CLI::App* retire =
      library->add_subcommand("retire", "never reuse an entry again (it stays listed with --all, with the reason)");
  retire->add_option("id", opt->id, "the entry's id (temper library list)")->required();
  retire->add_option("--reason", opt->reason, "why it must not be reused; shown with the entry for good")->required();
  retire->add_flag("--json", opt->json, "print the response as JSON");
  retire->callback([&ctx, opt] {
    ctx.run = [&ctx, opt]() -> Status {
      TEMPER_ASSIGN_OR_RETURN(Connection conn, Connection::Open(ctx.connection));
      temper::v1::RetireFixRequest request;
      request.set_fix_id(opt->id);
      request.set_reason(opt->reason);
      temper::v1::Fix response;
      grpc::Status status = conn.stub().RetireFix(conn.NewContext().get(), request, &response);
      if (!status.ok()) return conn.Explain(status);
      Print(opt->json ? RenderJson(response)
                      : fmt::format("library entry {} ({}) retired: it is never reused again\n", response.id(),
                                    ShortRuleName(response.rule_id())));
      return Status::OK();
    };
  });
}

}  // namespace temper::cli
