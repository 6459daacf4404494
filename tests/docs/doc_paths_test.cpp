// Every repository path the documents name resolves in the checkout (issue 48: README and
// bench/RESULTS.md named files that had moved, such as orchestrator/sqlite_env_vfs.h).
#include "docs/doc_paths.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <fstream>
#include <sstream>

namespace temper::testing {
namespace {

namespace fs = std::filesystem;

std::string ReadText(const fs::path& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// The documents a reader is sent to: README, docs/, the current figures and the diary's index.
std::vector<fs::path> CurrentDocuments(const fs::path& checkout) {
  std::vector<fs::path> documents = {"README.md", "bench/RESULTS.md", "bench/history/README.md"};
  for (const auto& entry : fs::directory_iterator(checkout / "docs")) {
    if (entry.path().extension() == ".md") documents.push_back(fs::relative(entry.path(), checkout));
  }
  return documents;
}

std::string Describe(const fs::path& document, const std::vector<NamedPath>& stale) {
  std::string text;
  for (const NamedPath& named : stale) {
    text += document.string() + ":" + std::to_string(named.line) + ": " + (named.is_link ? "link " : "") + named.path +
            "\n";
  }
  return text;
}

}  // namespace

TEST_CASE("The checker reports a planted stale path and passes real ones", "[docs]") {
  const fs::path checkout = TEMPER_SOURCE_DIR;
  const std::string markdown =
      "The parser is `engine/cpu/forward.cpp:12` and `engine/cpu/no_such_pass.cpp`, set up by\n"
      "```sh\ndeploy/setup.sh\ndeploy/no_such_setup.sh --flag\n```\n"
      "Figures in [RESULTS](bench/RESULTS.md) and [gone](docs/no_such_page.md#anchor), "
      "[web](https://example.com/x.md), a template `tests/<folder>/<file>_test.cpp`, the build's "
      "`build/bench/temper-bench` and an absolute `/etc/temper/models.yaml`.\n";
  const std::vector<NamedPath> named = PathsNamedIn(markdown, TopLevelFolders(checkout));
  REQUIRE(named.size() == 6);
  CHECK(named[0].path == "engine/cpu/forward.cpp");
  CHECK(named[2].line == 3);

  const std::vector<NamedPath> stale = StalePathsIn("README.md", markdown, checkout);
  INFO(Describe("planted", stale));
  REQUIRE(stale.size() == 3);
  CHECK(stale[0].path == "engine/cpu/no_such_pass.cpp");
  CHECK(stale[1].path == "deploy/no_such_setup.sh");
  CHECK(stale[2].path == "docs/no_such_page.md");
  CHECK(stale[2].is_link);
}

TEST_CASE("A link resolves from its own document's folder", "[docs]") {
  const fs::path checkout = TEMPER_SOURCE_DIR;
  const std::string markdown = "[index](history/README.md) and [up](../README.md)\n";
  CHECK(StalePathsIn("bench/RESULTS.md", markdown, checkout).empty());
  CHECK(StalePathsIn("docs/x.md", markdown, checkout).size() == 1);  // docs/history/README.md is not there
}

TEST_CASE("README and docs and RESULTS name only paths that exist", "[docs]") {
  const fs::path checkout = TEMPER_SOURCE_DIR;
  std::string report;
  size_t named = 0;
  for (const fs::path& document : CurrentDocuments(checkout)) {
    const std::string text = ReadText(checkout / document);
    REQUIRE_FALSE(text.empty());
    named += PathsNamedIn(text, TopLevelFolders(checkout)).size();
    report += Describe(document, StalePathsIn(document, text, checkout));
  }
  INFO("stale paths:\n" << report);
  CHECK(report.empty());
  CHECK(named > 100);  // the documents do cite the code; a checker that finds nothing checks nothing
}

// The exception: bench/history/ is a diary, moved verbatim from the old RESULTS.md. An entry says
// what a file was called on its day, and those files may since have moved or gone (kernel
// candidates tried and dropped, folders reorganized). Its code paths are therefore listed, not
// failed; its links (the index's) must resolve, and every entry file must be in the index.
TEST_CASE("bench/history may name files of its day and its index lists every entry", "[docs]") {
  const fs::path checkout = TEMPER_SOURCE_DIR;
  const std::string index = ReadText(checkout / "bench/history/README.md");
  std::string stale_in_diary;
  for (const auto& entry : fs::directory_iterator(checkout / "bench/history")) {
    const std::string name = entry.path().filename().string();
    if (name == "README.md") continue;
    CHECK(index.find("(" + name + ")") != std::string::npos);
    const fs::path document = fs::relative(entry.path(), checkout);
    const std::string text = ReadText(entry.path());
    for (const NamedPath& named : StalePathsIn(document, text, checkout)) {
      if (named.is_link) {
        FAIL_CHECK(document.string() << ":" << named.line << ": link " << named.path << " resolves nowhere");
      } else {
        stale_in_diary += document.string() + ":" + std::to_string(named.line) + ": " + named.path + "\n";
      }
    }
  }
  // Printed for whoever reads the diary, so a moved file can be followed; not a failure.
  if (!stale_in_diary.empty()) WARN("paths the diary names that have since moved or gone:\n" << stale_in_diary);
}

// Source comments cite the diary as evidence ("bench/history/issue-25-cuda-decode-kernels.md"): each
// cited entry must exist, or the comment sends its reader nowhere.
TEST_CASE("Every bench/history file a source comment cites exists", "[docs]") {
  const fs::path checkout = TEMPER_SOURCE_DIR;
  const std::string prefix = "bench/history/";
  std::string missing;
  size_t cited = 0;
  for (const char* folder : {"bench", "common", "engine", "orchestrator", "roles", "stig", "tests", "tools"}) {
    if (!fs::exists(checkout / folder)) continue;
    for (const auto& entry : fs::recursive_directory_iterator(checkout / folder)) {
      const std::string extension = entry.path().extension().string();
      if (!entry.is_regular_file() || entry.path().string().find("/data/") != std::string::npos) continue;
      if (extension != ".cpp" && extension != ".h" && extension != ".cu" && extension != ".sh" && extension != ".py") {
        continue;
      }
      const std::string text = ReadText(entry.path());
      for (size_t at = text.find(prefix); at != std::string::npos; at = text.find(prefix, at + 1)) {
        const size_t end = text.find(".md", at);
        if (end == std::string::npos || text.find_first_of(" \n)", at) < end) continue;
        ++cited;
        const std::string path = text.substr(at, end + 3 - at);
        if (!fs::exists(checkout / path)) missing += fs::relative(entry.path(), checkout).string() + ": " + path + "\n";
      }
    }
  }
  INFO("cited diary files that do not exist:\n" << missing);
  CHECK(missing.empty());
  CHECK(cited > 0);
}

TEST_CASE("README stays under 300 lines and RESULTS under 400 and README keeps the two CI commands", "[docs]") {
  const fs::path checkout = TEMPER_SOURCE_DIR;
  const auto line_count = [&](const char* name) {
    const std::string text = ReadText(checkout / name);
    return std::count(text.begin(), text.end(), '\n');
  };
  CHECK(line_count("README.md") < 300);
  CHECK(line_count("bench/RESULTS.md") < 400);

  // .ci/run runs exactly the README's commands: each of its command lines is a line of README.
  const std::string readme = ReadText(checkout / "README.md");
  std::istringstream ci(ReadText(checkout / ".ci/run"));
  std::string line;
  int commands = 0;
  while (std::getline(ci, line)) {
    if (line.empty() || line.starts_with('#') || line.starts_with("set ") || line.starts_with("cd ")) continue;
    ++commands;
    CHECK(readme.find("\n" + line + "\n") != std::string::npos);
  }
  CHECK(commands == 2);
}

}  // namespace temper::testing
