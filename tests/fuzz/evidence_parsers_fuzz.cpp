// libFuzzer entry point for the readers of evidence files that may come from elsewhere: CKL and
// CKLB checklists, stored change sets, and OpenSCAP ARF files (read from a scratch file, as the
// reader takes a path). Any input must give a value or a DataLoss/InvalidArgument Status; never a
// crash, a hang, a leak or an out-of-bounds read (ASan/UBSan watch). Whatever reads must also write
// back and read again to the same value.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <string_view>

#include "orchestrator/evidence/checklist_ckl.h"
#include "orchestrator/evidence/checklist_cklb.h"
#include "stig/change_set.h"
#include "stig/scap/oval_evidence.h"

namespace {

// The scratch ARF file: one per process, rewritten for each input, removed when the fuzzer exits.
struct ArfFile {
  std::string path = "/tmp/temper-fuzz-arf-" + std::to_string(::getpid()) + ".xml";
  ~ArfFile() { std::remove(path.c_str()); }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace temper;
  const std::string_view text(reinterpret_cast<const char*>(data), size);

  auto ckl = evidence::ReadCkl(text, "fuzz.ckl");
  if (!ckl.ok() && ckl.status().code() != StatusCode::kDataLoss) std::abort();
  if (ckl.ok()) {
    auto again = evidence::ReadCkl(evidence::WriteCkl(*ckl), "again.ckl");
    if (!again.ok()) std::abort();
  }
  auto cklb = evidence::ReadCklb(text, "fuzz.cklb");
  if (!cklb.ok() && cklb.status().code() != StatusCode::kDataLoss) std::abort();
  if (cklb.ok()) {
    auto again = evidence::ReadCklb(evidence::WriteCklb(*cklb), "again.cklb");
    if (!again.ok()) std::abort();
  }
  auto changes = stig::ChangeSet::FromJson(text);
  if (!changes.ok() && changes.status().code() != StatusCode::kInvalidArgument) std::abort();
  if (changes.ok() && !(stig::ChangeSet::FromJson(changes->ToJson()).ok())) std::abort();

  static const ArfFile scratch;
  const std::string& arf = scratch.path;
  {
    std::ofstream(arf, std::ios::binary | std::ios::trunc)
        .write(text.data(), static_cast<std::streamsize>(text.size()));
  }
  auto evidence = stig::ReadOvalEvidence(arf);
  if (!evidence.ok() && evidence.status().code() != StatusCode::kDataLoss) std::abort();
  if (evidence.ok()) {
    for (const stig::RuleEvidence& e : *evidence) (void)e.Text();
  }
  return 0;
}
