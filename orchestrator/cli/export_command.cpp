// temper export BATCH --format arf|ckl|cklb|xccdf|html|ansible|sh [--disa-stig FILE] [-o FILE]: a
// batch's evidence as a file for an assessor's tool, or its kept fixes as a playbook or a script a
// fleet tool runs. temperd makes the file (it holds the results, the content and the fixes), so this
// works against a daemon on another machine too; the CLI sends DISA's STIG when given one, then
// receives and writes the file, and names on stderr the kept fixes a playbook or script leaves out.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <vector>

#include <fmt/format.h>

#include "orchestrator/cli/commands.h"
#include "orchestrator/config/request_bounds.h"

namespace temper::cli {
namespace {

// Writes `content` to `path` through a temporary file in the same directory, so a failed or
// interrupted export never leaves half a file under the final name.
Status WriteFileAtomically(const std::string& path, const std::string& content) {
  std::string tmp = path + ".part";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return Status::IOError(fmt::format("-o: cannot create {}", tmp));
    out.write(content.data(), static_cast<std::streamsize>(content.size()));
    out.close();
    if (!out) return Status::IOError(fmt::format("-o: writing {} failed", tmp));
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    return Status::IOError(fmt::format("-o: cannot rename {} to {}", tmp, path));
  }
  return Status::OK();
}

// The DISA STIG file to send, read whole. Its contents are temperd's to judge; here only whether it
// can travel in one request.
Result<std::string> ReadDisaStigFile(const std::string& path) {
  std::error_code ec;
  auto size = std::filesystem::file_size(path, ec);
  if (ec) return Status::NotFound(fmt::format("--disa-stig {}: {}", path, ec.message()));
  if (size > kMaxDisaStigUploadBytes) {
    return Status::InvalidArgument(fmt::format(
        "--disa-stig {}: {} bytes, more than the {} one request may carry; put it in the directory disa_stigs: "
        "names in temperd.yaml instead",
        path, size, kMaxDisaStigUploadBytes));
  }
  std::ifstream in(path, std::ios::binary);
  std::string text(static_cast<size_t>(size), '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  if (!in) return Status::IOError(fmt::format("--disa-stig {}: cannot read it", path));
  return text;
}

}  // namespace

void AddExportCommand(CLI::App& app, CommandContext& ctx) {
  struct Options {
    std::string batch;
    std::string format;
    std::string output;
    std::string disa_stig;
  };
  auto opt = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "export",
      "a batch's evidence as a file: ARF (OpenSCAP's results), CKL (STIG Viewer 2), CKLB (STIG Viewer 3), "
      "XCCDF results with DISA's rule ids (STIG Manager's import) or a self-contained HTML report with the "
      "before/after score, every attempt and the diffs applied; or the batch's kept fixes as an Ansible playbook "
      "(ansible) or a POSIX sh script (sh) that sets exactly the files, packages and services they changed, "
      "refusing a host whose file drifted, idempotent, with a dry run (ansible-playbook --check, sh FILE --check)");
  cmd->add_option("batch", opt->batch, "batch id")->required();
  cmd->add_option("--format", opt->format,
                  "arf, ckl, cklb, xccdf, html, ansible (batch-<id>.yml) or sh (batch-<id>.sh)")
      ->required()
      ->check(CLI::IsMember({"arf", "ckl", "cklb", "xccdf", "html", "ansible", "sh"}));
  cmd->add_option("--disa-stig", opt->disa_stig,
                  "DISA's STIG XCCDF file (e.g. U_CAN_Ubuntu_20-04_LTS_STIG_V1R12_Manual-xccdf.xml): checklists and "
                  "XCCDF results carry its V- and SV- ids and list every requirement of the STIG; default: the one "
                  "of temperd's disa_stigs: directory that covers the batch, else SSG's ids");
  cmd->add_option(
      "-o,--output", opt->output,
      "file to write; \"-\" writes to stdout; default: the name temperd suggests, in the current directory");
  cmd->callback([&ctx, opt] {
    ctx.run = [&ctx, opt]() -> Status {
      TEMPER_ASSIGN_OR_RETURN(Connection conn, Connection::Open(ctx.connection));
      temper::v1::ExportBatchRequest request;
      request.set_batch_id(opt->batch);
      request.set_format(opt->format);
      if (!opt->disa_stig.empty()) {
        TEMPER_ASSIGN_OR_RETURN(std::string text, ReadDisaStigFile(opt->disa_stig));
        request.set_disa_stig(std::move(text));
        request.set_disa_stig_name(std::filesystem::path(opt->disa_stig).filename().string());
      }
      // Large exports take longer than a quick call: no deadline, the stream ends when the file does.
      auto context = conn.NewContext(/*with_deadline=*/false);
      auto reader = conn.stub().ExportBatch(context.get(), request);
      std::string content, file_name;
      std::vector<std::string> not_carried;
      uint64_t total = 0;
      temper::v1::ExportChunk chunk;
      bool first = true;
      while (reader->Read(&chunk)) {
        if (first) {
          file_name = chunk.file_name();
          total = chunk.total_bytes();
          content.reserve(total);
          not_carried.assign(chunk.not_carried().begin(), chunk.not_carried().end());
          first = false;
        }
        if (chunk.offset() != content.size()) {
          return Status::DataLoss(
              fmt::format("temperd sent bytes at offset {} after {} bytes", chunk.offset(), content.size()));
        }
        content += chunk.data();
      }
      grpc::Status status = reader->Finish();
      if (!status.ok()) return conn.Explain(status);
      if (first || content.size() != total) {
        return Status::DataLoss(fmt::format("the export ended after {} of {} bytes", content.size(), total));
      }
      if (!not_carried.empty()) {
        std::fprintf(stderr,
                     "temper: %zu kept fix(es) have no recorded change set and are not in the file (apply them "
                     "another way):\n",
                     not_carried.size());
        for (const std::string& rule : not_carried) std::fprintf(stderr, "  %s\n", rule.c_str());
      }
      if (opt->output == "-") {
        std::fwrite(content.data(), 1, content.size(), stdout);
        return Status::OK();
      }
      std::string path = opt->output.empty() ? std::filesystem::path(file_name).filename().string() : opt->output;
      TEMPER_RETURN_IF_ERROR(WriteFileAtomically(path, content));
      std::fprintf(stderr, "temper: wrote %s (%zu bytes)\n", path.c_str(), content.size());
      return Status::OK();
    };
  });
}

}  // namespace temper::cli
