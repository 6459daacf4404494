// libFuzzer target: the journal reader that temperd runs at start-up (JournalFiles::Reconcile,
// orchestrator/journal_files.h), on a journal file holding arbitrary bytes: a torn, oversized or
// garbled last line must not stop the daemon from starting nor lose a committed event.
//
// A real SQLite state store (in a temporary directory on /dev/shm when there is one) holds a few
// committed daemon events. Each input becomes daemon.jsonl; then Reconcile must either fail with a
// named error (DataLoss, IOError, InvalidArgument, OutOfRange) or succeed leaving a file that ends
// with a whole line whose event covers every committed one, so that a second Reconcile appends
// nothing. Only the public entry points are used: how the reader survives bad lines is its own
// business. Seeds: tests/fuzz/corpus/journal_reader.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "orchestrator/journal_files.h"
#include "orchestrator/state_store.h"

namespace {

void Expect(bool ok) {
  if (!ok) std::abort();
}

struct Fixture {
  std::string dir;
  std::unique_ptr<temper::StateStore> store;
  uint64_t last_seq = 0;

  Fixture() {
    std::string base = std::filesystem::exists("/dev/shm") ? "/dev/shm" : std::filesystem::temp_directory_path().string();
    std::string pattern = base + "/temper-journal-fuzz-XXXXXX";
    Expect(mkdtemp(pattern.data()) != nullptr);
    dir = pattern;
    auto opened = temper::StateStore::Open(dir + "/state.db");
    Expect(opened.ok());
    store = std::move(*opened);
    for (int i = 0; i < 3; ++i) {
      temper::NewEvent e;
      e.type = "daemon.started";
      e.data_json = R"({"note": "fuzz fixture"})";
      auto appended = store->AppendEvent(e);
      Expect(appended.ok());
      last_seq = appended->seq;
    }
  }
  ~Fixture() { std::filesystem::remove_all(dir); }
};

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Fixture fixture;
  const std::string journal_dir = fixture.dir + "/journal";
  std::filesystem::create_directories(journal_dir);
  const std::string file = journal_dir + "/daemon.jsonl";
  {
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  auto files = temper::JournalFiles::Open(journal_dir);
  Expect(files.ok());
  auto reconciled = (*files)->Reconcile(*fixture.store);
  if (!reconciled.ok()) {
    const temper::StatusCode code = reconciled.status().code();
    Expect(code == temper::StatusCode::kDataLoss || code == temper::StatusCode::kIOError ||
           code == temper::StatusCode::kInvalidArgument || code == temper::StatusCode::kOutOfRange);
    return 0;
  }
  const std::string text = Slurp(file);
  Expect(!text.empty() && text.back() == '\n');
  const size_t start = text.rfind('\n', text.size() - 2);
  const std::string last = text.substr(start == std::string::npos ? 0 : start + 1, text.size() - 1 - (start == std::string::npos ? 0 : start + 1));
  const nlohmann::json line = nlohmann::json::parse(last, nullptr, false);
  Expect(!line.is_discarded() && line.contains("seq") && line["seq"].is_number_unsigned());
  Expect(line["seq"].get<uint64_t>() >= fixture.last_seq);
  auto again = (*files)->Reconcile(*fixture.store);
  Expect(again.ok() && *again == 0);
  return 0;
}
