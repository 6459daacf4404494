#include "orchestrator/config/yaml_reader.h"

#include <catch2/catch.hpp>

namespace temper {
namespace {

TEST_CASE("durations parse units and refuse ambiguity") {
  CHECK(ParseDuration("90s")->count() == 90);
  CHECK(ParseDuration("20m")->count() == 1200);
  CHECK(ParseDuration("1h30m")->count() == 5400);
  CHECK(ParseDuration("2d")->count() == 172800);
  CHECK(ParseDuration("45")->count() == 45);
  CHECK_FALSE(ParseDuration("1h30").ok());
  CHECK_FALSE(ParseDuration("").ok());
  CHECK_FALSE(ParseDuration("5w").ok());
  CHECK_FALSE(ParseDuration("99999999999999999999s").ok());
  CHECK(ParseDuration("x").status().message() == "'x' is not a duration (examples: 90s, 20m, 1h30m, 2d)");
}

TEST_CASE("a YAML syntax error names file, line and column") {
  auto r = YamlNode::LoadString("a: [1, 2\nb: 3\n", "f.yaml");
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message().rfind("f.yaml:", 0) == 0);
  CHECK(r.status().message().find("YAML syntax error") != std::string::npos);
}

TEST_CASE("unknown and duplicate keys are located errors") {
  auto root = YamlNode::LoadString("alpha: 1\nbeta: 2\nalpah: 3\n", "f.yaml");
  REQUIRE(root.ok());
  Status s = root->ExpectMapWithKeys({"alpha", "beta"});
  CHECK(s.message() == "f.yaml:3:1: alpah: unknown key (did you mean 'alpha'?) (valid keys here: alpha, beta)");

  auto dup = YamlNode::LoadString("alpha: 1\nalpha: 2\n", "f.yaml");
  REQUIRE(dup.ok());
  CHECK(dup->ExpectMap().message() == "f.yaml:2:1: alpha: duplicate key");
}

TEST_CASE("scalar readers check type and range and name the nested path") {
  auto root = YamlNode::LoadString("outer:\n  n: 70\n  s: [a]\n  b: yes\n  f: 0.5x\n", "f.yaml");
  REQUIRE(root.ok());
  YamlNode outer = *root->Require("outer");
  CHECK(outer.Require("n")->AsInt(0, 50).status().message() == "f.yaml:2:6: outer.n: 70 is out of range [0, 50]");
  CHECK(outer.Require("s")->AsString().status().message() == "f.yaml:3:6: outer.s: expected a string, got a sequence");
  CHECK(outer.Require("b")->AsBool().status().message() == "f.yaml:4:6: outer.b: expected true or false");
  CHECK(outer.Require("f")->AsDouble(0, 1).status().message() == "f.yaml:5:6: outer.f: expected a number, got '0.5x'");
  CHECK(outer.Require("missing").status().message() == "f.yaml:2:3: outer: missing required key 'missing'");
}

TEST_CASE("relative paths resolve against the config file's directory") {
  auto root = YamlNode::LoadString("p: data/x.db\nq: /abs/y\n", "/etc/temper/temperd.yaml");
  REQUIRE(root.ok());
  CHECK(*root->Require("p")->AsPath() == "/etc/temper/data/x.db");
  CHECK(*root->Require("q")->AsPath() == "/abs/y");
}

TEST_CASE("a missing file is NotFound naming it") {
  auto r = YamlNode::LoadFile("/nonexistent/temperd.yaml");
  CHECK(r.status().code() == StatusCode::kNotFound);
  CHECK(r.status().message() == "/nonexistent/temperd.yaml: no such file");
}

}  // namespace
}  // namespace temper
