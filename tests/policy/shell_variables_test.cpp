// Literal values of shell variables, as the command policy resolves programs and content with them.
#include "policy/shell_variables.h"

#include <catch2/catch.hpp>

using namespace temper;

namespace {

ShellVariables Of(std::string_view script) {
  auto parsed = SplitShellCommand(script);
  INFO(script);
  REQUIRE(parsed.ok());
  return ShellVariables(parsed->assignments);
}

using Lists = std::vector<std::vector<std::string>>;

}  // namespace

TEST_CASE("a variable's literal values, wherever the script assigns them") {
  CHECK(Of("SYSTEMCTL_EXEC='/usr/bin/systemctl'").Resolve("$SYSTEMCTL_EXEC") == Lists{{"/usr/bin/systemctl"}});
  CHECK(Of("pof=\"/bin/pidof\"").Resolve("${pof}") == Lists{{"/bin/pidof"}});
  // Arrays: the first element alone, or all with [@]; += appends to every value.
  auto arrays = Of("sed_command=('sed' '-i'); if test -L f; then sed_command+=('--follow-symlinks'); fi");
  CHECK(arrays.Resolve("${sed_command[@]}") == Lists{{"sed", "-i", "--follow-symlinks"}});
  CHECK(arrays.Resolve("$sed_command") == Lists{{"sed"}});
  // Every branch's value counts; a for loop's words are each a value.
  CHECK(Of("if a; then X=reboot; else X=ls; fi").Resolve("$X") == Lists{{"reboot"}, {"ls"}});
  CHECK(Of("for f in /etc/a /etc/b; do :; done").Resolve("$f") == Lists{{"/etc/a"}, {"/etc/b"}});
  // An unquoted value splits at blanks.
  CHECK(Of("C='systemctl stop'").Resolve("$C") == Lists{{"systemctl", "stop"}});
  CHECK(Of("export P=/usr/sbin/reboot; readonly Q=x").Resolve("$P") == Lists{{"/usr/sbin/reboot"}});
}

TEST_CASE("computed, unknown and partial references have no value") {
  CHECK_FALSE(Of("X=$(cat /tmp/x)").Resolve("$X").has_value());
  CHECK_FALSE(Of("X=ls; X=$Y").Resolve("$X").has_value());  // one computed value poisons the others
  CHECK_FALSE(Of("read -r X").Resolve("$X").has_value());
  CHECK_FALSE(Of("mapfile -t A < f").Resolve("${A[@]}").has_value());
  CHECK_FALSE(Of("printf -v X '%s' reboot").Resolve("$X").has_value());
  CHECK_FALSE(Of("for f in $(ls); do :; done").Resolve("$f").has_value());
  CHECK_FALSE(Of("").Resolve("$HOME").has_value());
  CHECK_FALSE(Of("X=ls").Resolve("/usr/bin/$X").has_value());
  CHECK_FALSE(Of("X=ls").Resolve("${X:-reboot}").has_value());
  CHECK_FALSE(Of("X=ls").Resolve("$1").has_value());
}

TEST_CASE("substitution replaces only references with one known value") {
  auto vars = Of("U=ssh; T=900; X=$(date); A=(a b)");
  CHECK(vars.Substitute("systemctl stop $U; TMOUT=${T}s") == "systemctl stop ssh; TMOUT=900s");
  CHECK(vars.Substitute("$X ${A} $NONE ${U:-x} $") == "$X ${A} $NONE ${U:-x} $");
}
