// The public checklist fixtures in tests/data/checklist (see its README for their sources), and
// DISA's CKL schema checked with xmllint, the independent reader the tests trust.
#pragma once

#include <string>

#include <catch2/catch.hpp>

#include "orchestrator/daemon_process.h"
#include "orchestrator/temp_dir.h"

namespace temper::testing {

inline std::string ChecklistData(const std::string& name) {
  return std::string(TEMPER_TEST_DATA_DIR) + "/checklist/" + name;
}

// xmllint (libxml2-utils) is the schema checker: RunProcess takes absolute paths.
inline constexpr const char* kXmllint = "/usr/bin/xmllint";

// xmllint's verdict on `ckl_text` against U_Checklist_Schema_V2.xsd: "" when valid, else why not.
inline std::string CklSchemaErrors(const std::string& ckl_text) {
  TempDir dir;
  std::string path = dir.Write("checklist.ckl", ckl_text);
  ProcessResult r =
      RunProcess({kXmllint, "--noout", "--nonet", "--schema", ChecklistData("U_Checklist_Schema_V2.xsd"), path});
  return r.exit_code == 0 ? "" : "xmllint exited " + std::to_string(r.exit_code) + ": " + r.err + r.out;
}

}  // namespace temper::testing
