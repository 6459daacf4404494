// An attacker's SCAP source datastream: one XCCDF rule whose check is an OpenSCAP SCE script
// (system http://open-scap.org/page/SCE) embedded in the datastream as an extended component, the
// layout `oscap ds sds-compose` produces. The script creates `marker` (a host path) and reports
// pass, so a test can tell whether anything ever ran it. The profile is SSG's STIG profile id and
// the rule an SSG-style id, so `temper submit -p stig -r sce_marker` names them.
#pragma once

#include <string>

#include <fmt/format.h>

namespace temper::testing {

inline constexpr const char* kSceRule = "sce_marker";
inline constexpr const char* kSceSystem = "http://open-scap.org/page/SCE";

inline std::string SceDatastream(const std::string& marker) {
  return fmt::format(R"(<?xml version="1.0" encoding="UTF-8"?>
<ds:data-stream-collection xmlns:ds="http://scap.nist.gov/schema/scap/source/1.2" xmlns:xlink="http://www.w3.org/1999/xlink" xmlns:cat="urn:oasis:names:tc:entity:xmlns:xml:catalog" id="scap_org.open-scap_collection_from_xccdf_xccdf.xml" schematron-version="1.2">
  <ds:data-stream id="scap_org.open-scap_datastream_from_xccdf_xccdf.xml" scap-version="1.2" use-case="OTHER">
    <ds:checklists>
      <ds:component-ref id="scap_org.open-scap_cref_xccdf.xml" xlink:href="#scap_org.open-scap_comp_xccdf.xml">
        <cat:catalog>
          <cat:uri name="marker.sh" uri="#scap_org.open-scap_cref_marker.sh"/>
        </cat:catalog>
      </ds:component-ref>
    </ds:checklists>
    <ds:extended-components>
      <ds:component-ref id="scap_org.open-scap_cref_marker.sh" xlink:href="#scap_org.open-scap_ecomp_marker.sh"/>
    </ds:extended-components>
  </ds:data-stream>
  <ds:component id="scap_org.open-scap_comp_xccdf.xml" timestamp="2026-11-25T18:02:38">
    <Benchmark xmlns="http://checklists.nist.gov/xccdf/1.2" id="xccdf_org.example_benchmark_sce" resolved="1" xml:lang="en-US">
      <status>accepted</status>
      <version>1</version>
      <Profile id="xccdf_org.ssgproject.content_profile_stig">
        <title>STIG</title>
        <select idref="xccdf_org.ssgproject.content_rule_{rule}" selected="true"/>
      </Profile>
      <Rule id="xccdf_org.ssgproject.content_rule_{rule}" selected="true" severity="high">
        <title>Looks like a check, runs a script</title>
        <check system="{system}">
          <check-import import-name="stdout"/>
          <check-content-ref href="marker.sh"/>
        </check>
      </Rule>
    </Benchmark>
  </ds:component>
  <ds:extended-component xmlns:oscap-sce-xccdf-stream="http://open-scap.org/page/SCE_xccdf_stream" id="scap_org.open-scap_ecomp_marker.sh" timestamp="2026-11-25T18:02:38">
    <oscap-sce-xccdf-stream:script>#!/bin/sh
touch '{marker}'
exit $XCCDF_RESULT_PASS
</oscap-sce-xccdf-stream:script>
  </ds:extended-component>
</ds:data-stream-collection>
)",
                     fmt::arg("rule", kSceRule), fmt::arg("system", kSceSystem), fmt::arg("marker", marker));
}

}  // namespace temper::testing
