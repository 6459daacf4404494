// libFuzzer target: the journal reader that temperd runs at start-up (JournalFiles::Reconcile,
// orchestrator/store/journal_files.h), on a journal file holding arbitrary bytes: a torn, oversized or
// garbled last line must not stop the daemon from starting nor lose a committed event.
//
// A real SQLite state store (in a temporary directory on /dev/shm when there is one) holds a few
// committed daemon events. Each input becomes daemon.jsonl; then Reconcile must succeed (nothing a
// file holds may stop the start-up) and leave a file with no torn tail whose events cover every
// committed one, so that a second Reconcile appends nothing. Only the public entry points are
// used: how the reader survives bad lines is its own business. Seeds: tests/fuzz/corpus/journal_reader.
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

#include "orchestrator/store/journal_file_scan.h"
#include "orchestrator/store/journal_files.h"
#include "orchestrator/store/state_store.h"

namespace {

void Expect(bool ok) {
  if (!ok) std::abort();
}

struct Fixture {
  std::string dir;
  std::unique_ptr<temper::StateStore> store;
  uint64_t last_seq = 0;

  Fixture() {
    std::string base =
        std::filesystem::exists("/dev/shm") ? "/dev/shm" : std::filesystem::temp_directory_path().string();
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
  // Reconcile fails only when the file cannot be read or written; never for what it holds.
  Expect(reconciled.ok());
  const std::string text = Slurp(file);
  // No torn tail is left, and the events the file holds (bad lines stay in place) cover every
  // committed one.
  Expect(!text.empty() && text.back() == '\n');
  std::istringstream in(text);
  auto scan = temper::ScanJournal(in);
  Expect(scan.ok() && scan->torn_bytes == 0 && scan->last_seq >= fixture.last_seq);
  auto again = (*files)->Reconcile(*fixture.store);
  Expect(again.ok() && again->appended == 0);
  return 0;
}
