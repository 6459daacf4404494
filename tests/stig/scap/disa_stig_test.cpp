#include "stig/scap/disa_stig.h"

#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <catch2/catch.hpp>

#include "platform/scratch_dir.h"
#include "stig/scap/content.h"

namespace temper::stig {
namespace {

const std::string kDisaUbuntu2004 =
    std::string(TEMPER_TEST_DATA_DIR) + "/stig/U_CAN_Ubuntu_20-04_LTS_STIG_V1R12_Manual-xccdf.xml";

TEST_CASE("DISA's Ubuntu 20.04 STIG V1R12 maps each STIG id to its V- and SV- ids", "[stig][disa]") {
  auto stig = ReadDisaStig(kDisaUbuntu2004);
  REQUIRE(stig.ok());
  CHECK(stig->benchmark_id == "Canonical_Ubuntu_20-04_LTS_STIG");
  CHECK(stig->title == "Canonical Ubuntu 20.04 LTS Security Technical Implementation Guide");
  CHECK(stig->version == "1");
  CHECK(stig->release_info == "Release: 12 Benchmark Date: 24 Apr 2024");
  CHECK(stig->RevisionName() == "V1R12");
  CHECK(stig->rules.size() == 166);
  const DisaStigRule& first = stig->rules.front();
  CHECK(first.vuln_id == "V-238196");
  CHECK(first.rule_id == "SV-238196r653763_rule");
  CHECK(first.stig_id == "UBTU-20-010000");
  CHECK(first.group_title == "SRG-OS-000002-GPOS-00002");
  CHECK(first.severity == "medium");
  CHECK(first.weight == "10.0");
  CHECK(first.documentable == "false");
  CHECK_THAT(first.discussion, Catch::StartsWith("If temporary user accounts remain active"));
  CHECK_THAT(first.check_content, Catch::StartsWith("Verify that the Ubuntu operating system expires"));
  CHECK_THAT(first.fix_text, Catch::Contains("sudo chage -E"));
  CHECK(first.check_content_ref == "M");
  CHECK(first.ccis == std::vector<std::string>{"CCI-000016"});
  const DisaStigRule* tmout = stig->FindByStigId("UBTU-20-010013");
  REQUIRE(tmout);
  CHECK(tmout->vuln_id.starts_with("V-"));
  CHECK(tmout->rule_id.starts_with("SV-"));
  CHECK(stig->FindByStigId("UBTU-20-999999") == nullptr);
}

TEST_CASE("SSG's Ubuntu 20.04 STIG profile names STIG ids that DISA's file holds", "[stig][disa]") {
  auto stig = ReadDisaStig(kDisaUbuntu2004);
  REQUIRE(stig.ok());
  auto content = Content::Load(std::string(kDefaultContentDir) + "/" + std::string(kUbuntu2004Datastream), "stig");
  REQUIRE(content.ok());
  std::set<std::string> ids;
  size_t rules_with_ids = 0, matched = 0;
  for (const std::string& id : content->profile_rule_ids()) {
    const RuleInfo* info = &content->rules().at(id);
    if (info->stig_ids.empty()) continue;
    ++rules_with_ids;
    bool any = false;
    for (const std::string& s : info->stig_ids) {
      ids.insert(s);
      any = any || stig->FindByStigId(s) != nullptr;
    }
    matched += any;
  }
  // SSG 0.1.65 names 21 STIG ids that no DISA release since V1R8 holds (DISA folded the audit
  // tools' and log files' permission rules into fewer requirements; "UBTU-20-01430" is SSG's typo):
  // their rules match no requirement and the checklist says so.
  CHECK(rules_with_ids > 150);
  CHECK(matched * 100 >= rules_with_ids * 85);
  CHECK(stig->FindByStigId("UBTU-20-010143") == nullptr);
  std::vector<DisaStig> stigs;
  stigs.push_back(*stig);
  CHECK(MatchingDisaStig(stigs, ids) == &stigs.front());
  CHECK(MatchingDisaStig(stigs, {"RHEL-09-211010"}) == nullptr);
}

TEST_CASE("a file that is not a DISA STIG is refused, naming the file and the element", "[stig][disa]") {
  CHECK(ParseDisaStig("not <xml", "upload.xml").status().code() == StatusCode::kDataLoss);
  CHECK_THAT(ParseDisaStig("not <xml", "upload.xml").status().message(),
             Catch::StartsWith("upload.xml:1: not well-formed XML"));
  CHECK(ParseDisaStig("<html/>", "page.xml").status().message() == "page.xml: no XCCDF Benchmark in it");
  // SSG's own XCCDF: its groups are not V- ids.
  auto ssg = ReadDisaStig(std::string(TEMPER_TEST_DATA_DIR) + "/stig/xccdf-only.xml");
  CHECK(ssg.status().code() == StatusCode::kInvalidArgument);
  CHECK_THAT(ssg.status().message(), Catch::Contains("this is not a DISA STIG"));
  const std::string no_version =
      R"(<Benchmark xmlns="http://checklists.nist.gov/xccdf/1.1" id="X_STIG"><version>1</version>)"
      R"(<Group id="V-1"><title>SRG</title><Rule id="SV-1r1_rule" severity="high"><title>t</title></Rule></Group>)"
      R"(</Benchmark>)";
  CHECK(ParseDisaStig(no_version, "x.xml").status().message() ==
        "x.xml: Group V-1: the Rule has no <version>, the STIG id");
  // Entities are refused with the document type that declares them: neither an external file nor
  // a billion laughs is read.
  const std::string xxe =
      R"(<?xml version="1.0"?><!DOCTYPE b [<!ENTITY x SYSTEM "file:///etc/hostname">]>)"
      R"(<Benchmark xmlns="http://checklists.nist.gov/xccdf/1.1" id="X_STIG"><version>1</version>)"
      R"(<Group id="V-1"><title>&x;</title><Rule id="SV-1r1_rule"><version>X-1</version><title>t</title></Rule>)"
      R"(</Group></Benchmark>)";
  CHECK(ParseDisaStig(xxe, "xxe.xml").status().message() ==
        "xxe.xml: declares a DOCTYPE; DISA's STIG files have none and temper reads none");
  // The classic: ten levels of ten references each, 10^10 expansions of the innermost entity.
  std::string laughs = R"(<?xml version="1.0"?><!DOCTYPE b [<!ENTITY e0 "lol">)";
  for (int level = 1; level <= 10; ++level) {
    std::string refs;
    for (int k = 0; k < 10; ++k) refs += fmt::format("&e{};", level - 1);
    laughs += fmt::format(R"(<!ENTITY e{} "{}">)", level, refs);
  }
  laughs += R"(]><Benchmark xmlns="http://checklists.nist.gov/xccdf/1.1" id="X"><title>&e10;</title></Benchmark>)";
  // libxml2 already refuses the amplification while parsing (DataLoss); the DOCTYPE check would
  // refuse it next.
  auto laughed = ParseDisaStig(laughs, "laughs.xml");
  INFO(laughed.status().ToString());
  CHECK_FALSE(laughed.ok());
}

TEST_CASE("the XCCDF 1.2 form inside a datastream reads to the same ids", "[stig][disa]") {
  const std::string ds =
      R"(<ds:data-stream-collection xmlns:ds="http://scap.nist.gov/schema/scap/source/1.2"><ds:component>)"
      R"(<Benchmark xmlns="http://checklists.nist.gov/xccdf/1.2" id="xccdf_mil.disa.stig_benchmark_X_STIG">)"
      R"(<plain-text id="release-info">Release: 3 Benchmark Date: 1 Jan 2025</plain-text><version>2</version>)"
      R"(<Group id="xccdf_mil.disa.stig_group_V-7"><title>SRG-7</title>)"
      R"(<Rule id="xccdf_mil.disa.stig_rule_SV-7r2_rule" severity="low"><version>X-00-7</version><title>t</title>)"
      R"(<description>&lt;VulnDiscussion&gt;a &amp;lt;b&amp;gt; c&lt;/VulnDiscussion&gt;</description>)"
      R"(<ident system="http://cyber.mil/legacy">V-70</ident><ident system="http://cyber.mil/cci">CCI-1</ident>)"
      R"(<check system="oval"><check-content-ref name="oval:mil.disa.stig.x:def:7"/></check></Rule></Group>)"
      R"(</Benchmark></ds:component></ds:data-stream-collection>)";
  auto stig = ParseDisaStig(ds, "ds.xml");
  REQUIRE(stig.ok());
  CHECK(stig->benchmark_id == "X_STIG");
  CHECK(stig->RevisionName() == "V2R3");
  REQUIRE(stig->rules.size() == 1);
  CHECK(stig->rules[0].vuln_id == "V-7");
  CHECK(stig->rules[0].rule_id == "SV-7r2_rule");
  CHECK(stig->rules[0].discussion == "a <b> c");
  CHECK(stig->rules[0].legacy_ids == std::vector<std::string>{"V-70"});
  CHECK(stig->rules[0].check_content_ref == "oval:mil.disa.stig.x:def:7");
}

TEST_CASE("a directory of DISA STIGs refuses two copies of one revision", "[stig][disa]") {
  ScratchDir dir = *ScratchDir::Create("", "disa");
  CHECK(ReadDisaStigDirectory(dir.path() + "/none").status().code() == StatusCode::kNotFound);
  auto empty = ReadDisaStigDirectory(dir.path());
  REQUIRE(empty.ok());
  CHECK(empty->empty());
  std::filesystem::copy_file(kDisaUbuntu2004, dir.path() + "/a.xml");
  std::ofstream(dir.path() + "/notes.txt") << "not read";
  auto one = ReadDisaStigDirectory(dir.path());
  REQUIRE(one.ok());
  CHECK(one->size() == 1);
  std::filesystem::copy_file(kDisaUbuntu2004, dir.path() + "/b.xml");
  auto two = ReadDisaStigDirectory(dir.path());
  CHECK(two.status().code() == StatusCode::kInvalidArgument);
  CHECK_THAT(two.status().message(), Catch::Contains("are both Canonical_Ubuntu_20-04_LTS_STIG V1R12"));
  std::ofstream(dir.path() + "/c.xml") << "<broken";
  std::filesystem::remove(dir.path() + "/b.xml");
  CHECK_THAT(ReadDisaStigDirectory(dir.path()).status().message(), Catch::StartsWith(dir.path() + "/c.xml:"));
}

}  // namespace
}  // namespace temper::stig
