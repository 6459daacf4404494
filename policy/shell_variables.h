// ShellVariables: the literal values a script gives its variables, so that the command policy sees
// what `"$SYSTEMCTL_EXEC" stop x` or `"${sed_command[@]}" s/a/b/ f` runs (SCAP Security Guide's
// fixes name programs this way) and what `echo "$line" >> /etc/cron.d/x` writes.
//
// Flow-insensitive on purpose: a variable's possible values are every literal value the script
// assigns it anywhere (NAME=value, NAME=(…), NAME+=(…), export/declare/local/readonly, a for loop's
// words), so branches and loops cannot hide one. A variable that is also given a computed value
// ($(…), $x, read, mapfile, printf -v, a for loop over computed words), or that the script never
// assigns (the environment's, a function's arguments), has no known value.
// Thread safety: immutable after construction.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "policy/shell_split.h"

namespace temper {

class ShellVariables {
 public:
  explicit ShellVariables(const std::vector<ShellAssignment>& assignments);

  // When `word` is exactly one variable reference ($x, ${x}, ${x[@]}, ${x[*]}, ${x[0]}): each word
  // list it may expand to (split at blanks, as an unquoted expansion is). nullopt when it is not
  // such a reference or the variable's values are not all known.
  std::optional<std::vector<std::vector<std::string>>> Resolve(std::string_view word) const;

  // `text` with each $x and ${x} whose variable has exactly one known value replaced by it; other
  // references are left as they are written.
  std::string Substitute(std::string_view text) const;

 private:
  struct Values {
    std::vector<std::vector<std::string>> candidates;  // each a list of elements
    bool computed = false;
  };
  std::map<std::string, Values> vars_;
};

}  // namespace temper
