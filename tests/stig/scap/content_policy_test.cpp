// The content policy against SSG's real Ubuntu 20.04 datastream and small hand-written ones, one
// per way content could make OpenSCAP run a script or read outside the datastream.
#include "stig/scap/content_policy.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <catch2/catch.hpp>

#include "platform/scratch_dir.h"
#include "stig/scap/content.h"

namespace temper::stig {
namespace {

// A datastream with one rule per check given (each "<check .../>" element text, XCCDF 1.2
// namespace by default), an OVAL component reachable as "oval.xml", and `extra` more elements in
// the data-stream (component-refs) and `cpe` in the benchmark.
std::string Datastream(const std::vector<std::string>& checks, const std::string& extra_refs = "",
                       const std::string& cpe_dictionary = "") {
  std::string rules;
  for (std::size_t i = 0; i < checks.size(); ++i) {
    rules += fmt::format(
        "      <Rule id=\"xccdf_org.example_rule_r{}\" selected=\"true\">\n        <title>r{}</title>\n"
        "        {}\n      </Rule>\n",
        i, i, checks[i]);
  }
  return fmt::format(R"(<?xml version="1.0" encoding="UTF-8"?>
<ds:data-stream-collection xmlns:ds="http://scap.nist.gov/schema/scap/source/1.2" xmlns:xlink="http://www.w3.org/1999/xlink" xmlns:cat="urn:oasis:names:tc:entity:xmlns:xml:catalog" xmlns:cpe-dict="http://cpe.mitre.org/dictionary/2.0" id="c">
  <ds:data-stream id="d" scap-version="1.3" use-case="OTHER">
    <ds:checklists>
      <ds:component-ref id="cref-xccdf" xlink:href="#comp-xccdf">
        <cat:catalog>
          <cat:uri name="oval.xml" uri="#cref-oval"/>
        </cat:catalog>
      </ds:component-ref>
    </ds:checklists>
    <ds:checks>
      <ds:component-ref id="cref-oval" xlink:href="#comp-oval"/>
{}
    </ds:checks>
  </ds:data-stream>
  <ds:component id="comp-xccdf" timestamp="2026-01-01T00:00:00">
    <Benchmark xmlns="http://checklists.nist.gov/xccdf/1.2" id="xccdf_org.example_benchmark_b" resolved="1">
      <status>accepted</status>
      <version>1</version>
{}{}    </Benchmark>
  </ds:component>
  <ds:component id="comp-oval" timestamp="2026-01-01T00:00:00">
    <oval_definitions xmlns="http://oval.mitre.org/XMLSchema/oval-definitions-5"/>
  </ds:component>
</ds:data-stream-collection>
)",
                     extra_refs, cpe_dictionary, rules);
}

const std::string kOval =
    R"(<check system="http://oval.mitre.org/XMLSchema/oval-definitions-5"><check-content-ref href="oval.xml" name="oval:x:def:1"/></check>)";
const std::string kOcil =
    R"(<check system="http://scap.nist.gov/schema/ocil/2"><check-content-ref href="oval.xml" name="q"/></check>)";
const std::string kSce =
    R"(<check system="http://open-scap.org/page/SCE"><check-content-ref href="oval.xml"/></check>)";

struct Written {
  ScratchDir dir = *ScratchDir::Create("", "policy");
  std::string Write(const std::string& text, const std::string& name = "ds.xml") const {
    std::string path = dir.path() + "/" + name;
    std::ofstream(path) << text;
    return path;
  }
};

TEST_CASE("SSG's own datastream keeps to the content policy", "[stig][content_policy]") {
  std::string ssg = std::string(kDefaultContentDir) + "/" + std::string(kUbuntu2004Datastream);
  Status s = CheckContentPolicy(ssg);
  INFO(s.ToString());
  CHECK(s.ok());
}

TEST_CASE("OVAL and OCIL checks from inside the datastream pass", "[stig][content_policy]") {
  Written w;
  Status s = CheckContentPolicy(w.Write(Datastream({kOval, kOcil})));
  INFO(s.ToString());
  CHECK(s.ok());
}

TEST_CASE("An SCE check is refused naming the rule, the system and the line", "[stig][content_policy]") {
  Written w;
  const std::string text = Datastream({kOval, kSce});
  const std::string path = w.Write(text);
  const auto sce_line = 1 + std::count(text.begin(), text.begin() + static_cast<long>(text.find("page/SCE")), '\n');
  Status s = CheckContentPolicy(path);
  INFO(s.message());
  REQUIRE(s.code() == StatusCode::kPermissionDenied);
  CHECK(s.message().find(path) != std::string::npos);
  CHECK(s.message().find(fmt::format("line {}: rule xccdf_org.example_rule_r1 checks with system "
                                     "\"http://open-scap.org/page/SCE\" (SCE: runs a script the datastream carries)",
                                     sce_line)) != std::string::npos);
  CHECK(s.message().find("r0 checks") == std::string::npos);  // the OVAL rule is fine
}

TEST_CASE("A check inside a complex-check, or with no system, is refused too", "[stig][content_policy]") {
  Written w;
  std::string complex = "<complex-check operator=\"AND\">" + kOval + kSce + "</complex-check>";
  Status s =
      CheckContentPolicy(w.Write(Datastream({complex, "<check><check-content-ref href=\"oval.xml\"/></check>"})));
  REQUIRE(s.code() == StatusCode::kPermissionDenied);
  CHECK(s.message().find("rule xccdf_org.example_rule_r0 checks with system \"http://open-scap.org/page/SCE\"") !=
        std::string::npos);
  CHECK(s.message().find("rule xccdf_org.example_rule_r1 checks with system \"\"") != std::string::npos);
  CHECK(s.message().find("2 violation(s)") != std::string::npos);
}

TEST_CASE("References that leave the datastream are refused", "[stig][content_policy]") {
  Written w;
  SECTION("a component-ref to a file") {
    Status s = CheckContentPolicy(
        w.Write(Datastream({kOval}, R"(<ds:component-ref id="cref-ext" xlink:href="file:/etc/temper/x.xml#c"/>)")));
    REQUIRE(s.code() == StatusCode::kPermissionDenied);
    CHECK(s.message().find(
              "component-ref cref-ext points outside the datastream (xlink:href \"file:/etc/temper/x.xml#c\")") !=
          std::string::npos);
  }
  SECTION("a check-content-ref to a path") {
    Status s = CheckContentPolicy(w.Write(Datastream(
        {R"(<check system="http://oval.mitre.org/XMLSchema/oval-definitions-5"><check-content-ref href="/etc/oval.xml"/></check>)"})));
    REQUIRE(s.code() == StatusCode::kPermissionDenied);
    CHECK(
        s.message().find("rule xccdf_org.example_rule_r0: check-content-ref href \"/etc/oval.xml\" names no component "
                         "of the datastream") != std::string::npos);
  }
  SECTION("a CPE dictionary check to a URL") {
    std::string dict =
        R"(      <cpe-dict:cpe-list><cpe-dict:cpe-item name="cpe:/o:example"><cpe-dict:check system="http://oval.mitre.org/XMLSchema/oval-definitions-5" href="https://example.com/oval.xml">oval:x:def:2</cpe-dict:check></cpe-dict:cpe-item></cpe-dict:cpe-list>
)";
    Status s = CheckContentPolicy(w.Write(Datastream({kOval}, "", dict)));
    REQUIRE(s.code() == StatusCode::kPermissionDenied);
    CHECK(s.message().find("CPE item cpe:/o:example: CPE check href \"https://example.com/oval.xml\"") !=
          std::string::npos);
  }
}

TEST_CASE("At most ten violations are listed, with the count of the rest", "[stig][content_policy]") {
  Written w;
  Status s = CheckContentPolicy(w.Write(Datastream(std::vector<std::string>(13, kSce))));
  REQUIRE(s.code() == StatusCode::kPermissionDenied);
  CHECK(s.message().find("13 violation(s)") != std::string::npos);
  CHECK(s.message().find("... and 3 more") != std::string::npos);
}

TEST_CASE("Content policy errors: missing file, malformed XML, not a datastream", "[stig][content_policy]") {
  Written w;
  CHECK(CheckContentPolicy(w.dir.path() + "/none.xml").code() == StatusCode::kNotFound);
  Status bad = CheckContentPolicy(w.Write("<a>\n<b></a>\n", "bad.xml"));
  CHECK(bad.code() == StatusCode::kDataLoss);
  CHECK(bad.message().find("line 2") != std::string::npos);
  Status plain = CheckContentPolicy(
      w.Write("<Benchmark xmlns=\"http://checklists.nist.gov/xccdf/1.2\" id=\"b\"/>\n", "xccdf.xml"));
  CHECK(plain.code() == StatusCode::kDataLoss);
  CHECK(plain.message().find("not a SCAP source datastream (the document is <Benchmark> "
                             "(http://checklists.nist.gov/xccdf/1.2))") != std::string::npos);
}

}  // namespace
}  // namespace temper::stig
