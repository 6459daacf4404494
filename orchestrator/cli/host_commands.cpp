// temper hosts [list] | hosts accept HOST [--fingerprint FP] | hosts clear TARGET
#include <cstdio>
#include <memory>

#include <fmt/format.h>

#include "orchestrator/cli/commands.h"
#include "orchestrator/cli/render.h"
#include "orchestrator/cli/whole_reads.h"

namespace temper::cli {

namespace {

void Print(const std::string& text) { std::fwrite(text.data(), 1, text.size(), stdout); }

std::string Keys(const temper::v1::Host& h) {
  if (h.recorded_keys_size() == 0) return "none (temper hosts accept)";
  std::string out;
  for (const auto& k : h.recorded_keys()) out += (out.empty() ? "" : ", ") + k.fingerprint();
  return out;
}

}  // namespace

std::string RenderHostTable(const temper::v1::ListHostsResponse& list) {
  if (list.hosts_size() == 0) {
    return "no SSH hosts (configure targets of type ssh, or submit with --host user@name)\n";
  }
  std::vector<std::vector<std::string>> rows = {
      {"TARGET", "ADDRESS", "STATE", "LAST BATCH", "UPDATED", "HOST KEY", "DETAIL"}};
  for (const auto& h : list.hosts()) {
    rows.push_back({h.target() + (h.configured() ? "" : " *"), h.address(), h.state(),
                    h.last_batch_id().empty() ? "-" : h.last_batch_id(), FormatTime(h.updated_at()), Keys(h),
                    OneLine(h.detail(), 80)});
  }
  return Table(rows) + "(* named on submit)\n";
}

void AddHostsCommand(CLI::App& app, CommandContext& ctx) {
  struct Options {
    bool json = false;
    std::string host, fingerprint, target;
  };
  auto opt = std::make_shared<Options>();
  CLI::App* hosts = app.add_subcommand("hosts", "SSH hosts: their state, host keys, and clearing one a human checked");
  hosts->add_flag("--json", opt->json, "print the response as JSON");
  auto list = [&ctx, opt]() -> Status {
    TEMPER_ASSIGN_OR_RETURN(Connection conn, Connection::Open(ctx.connection));
    TEMPER_ASSIGN_OR_RETURN(temper::v1::ListHostsResponse response, ReadHosts(conn));
    Print(opt->json ? RenderJson(response) + "\n" : RenderHostTable(response));
    return Status::OK();
  };
  hosts->callback([&ctx, list, hosts] {
    if (hosts->get_subcommands().empty()) ctx.run = list;
  });
  hosts->add_subcommand("list", "list SSH hosts with their last state")->callback([&ctx, list] { ctx.run = list; });

  CLI::App* accept = hosts->add_subcommand(
      "accept", "show the host keys a host offers, or record the one whose fingerprint you checked on the host");
  accept->add_option("host", opt->host, "a host target or user@name[:port]")->required();
  accept->add_option("--fingerprint", opt->fingerprint,
                     "SHA256:... as `ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub` prints it on the host");
  accept->callback([&ctx, opt] {
    ctx.run = [&ctx, opt]() -> Status {
      TEMPER_ASSIGN_OR_RETURN(Connection conn, Connection::Open(ctx.connection));
      temper::v1::AcceptHostKeyRequest request;
      request.set_host(opt->host);
      request.set_fingerprint(opt->fingerprint);
      temper::v1::AcceptHostKeyResponse response;
      grpc::Status status = conn.stub().AcceptHostKey(conn.NewContext().get(), request, &response);
      if (!status.ok()) return conn.Explain(status);
      if (opt->json) {
        Print(RenderJson(response) + "\n");
      } else if (response.recorded()) {
        Print(fmt::format("recorded {} {} for {}\n", response.accepted().type(), response.accepted().fingerprint(),
                          opt->host));
      } else {
        std::string text = fmt::format("{} offers (nothing recorded):\n", opt->host);
        for (const auto& k : response.offered()) text += fmt::format("  {} {}\n", k.type(), k.fingerprint());
        text += "Compare with the host's own `ssh-keygen -lf` output, then run again with --fingerprint.\n";
        Print(text);
      }
      return Status::OK();
    };
  });

  CLI::App* clear = hosts->add_subcommand("clear", "let a host marked needs_human take batches again");
  clear->add_option("target", opt->target, "the host's target name")->required();
  clear->callback([&ctx, opt] {
    ctx.run = [&ctx, opt]() -> Status {
      TEMPER_ASSIGN_OR_RETURN(Connection conn, Connection::Open(ctx.connection));
      temper::v1::ClearHostRequest request;
      request.set_target(opt->target);
      temper::v1::Host response;
      grpc::Status status = conn.stub().ClearHost(conn.NewContext().get(), request, &response);
      if (!status.ok()) return conn.Explain(status);
      Print(opt->json ? RenderJson(response) + "\n"
                      : fmt::format("host {} is {} again\n", response.target(), response.state()));
      return Status::OK();
    };
  });
}

}  // namespace temper::cli
