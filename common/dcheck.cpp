#include "common/dcheck.h"

#include <unistd.h>

#include <cstdlib>
#include <string>

#include <fmt/format.h>

namespace temper {

void DcheckFailed(std::string_view condition, std::string_view why, std::source_location where) {
  // One write(2), as Logger does, so the line is not torn by other threads' output before the abort.
  std::string line = fmt::format("{}:{}: {}: TEMPER_DCHECK({}) failed: {}\n", where.file_name(), where.line(),
                                 where.function_name(), condition, why);
  (void)!::write(STDERR_FILENO, line.data(), line.size());
  std::abort();
}

}  // namespace temper
