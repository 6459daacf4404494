#include "orchestrator/evidence/markup_escape.h"

#include <catch2/catch.hpp>

namespace temper::evidence {
namespace {

TEST_CASE("Markup is escaped, and bytes XML cannot hold are replaced", "[evidence][markup_escape]") {
  CHECK(MarkupEscape("<script>alert('x')</script> & \"q\"") ==
        "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;q&quot;");
  CHECK(MarkupEscape("tab\tnl\ncr\r") == "tab\tnl\ncr&#13;");
  CHECK(MarkupEscape(std::string("nul\0bell\x07", 9)) ==
        "nul\xEF\xBF\xBD"
        "bell\xEF\xBF\xBD");
  CHECK(MarkupEscape("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x94\x92") == "caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x94\x92");
  CHECK(MarkupEscape("latin-1 caf\xE9!") == "latin-1 caf\xEF\xBF\xBD!");
  CHECK(MarkupEscape("\xC0\xAF") == "\xEF\xBF\xBD\xEF\xBF\xBD");                  // overlong '/'
  CHECK(MarkupEscape("\xED\xA0\x80") == "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // a surrogate
  CHECK(MarkupEscape("\xEF\xBF\xBE") == "\xEF\xBF\xBD");                          // U+FFFE
  CHECK(MarkupEscape("\xE2\x82") == "\xEF\xBF\xBD\xEF\xBF\xBD");                  // cut short
}

TEST_CASE("Long text is cut at a character boundary, saying how much went", "[evidence][markup_escape]") {
  CHECK(CutText("short", 100) == "short");
  std::string euros;
  for (int i = 0; i < 100; ++i) euros += "\xE2\x82\xAC";
  std::string cut = CutText(euros, 100);
  CHECK(cut.size() <= 100);
  CHECK(MarkupEscape(cut) == cut);  // still valid UTF-8
  CHECK_THAT(cut, Catch::EndsWith("more bytes cut]"));
}

}  // namespace
}  // namespace temper::evidence
