// Prometheus text bodies read back by Prometheus's own parser (prometheus_client.parser from
// Debian's python3-prometheus-client, installed by deploy/setup.sh): what a scraper would read.
#pragma once

#include <map>
#include <optional>
#include <string>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "orchestrator/daemon_process.h"
#include "orchestrator/temp_dir.h"

namespace temper::testing {

// Every sample as `name{k="v",...}` (labels sorted by name; `name{}` without labels) → value.
// nullopt when the parser is not installed (the caller skips); a body it rejects fails the case.
inline std::optional<std::map<std::string, double>> ParsePrometheusText(const TempDir& dir, const std::string& text) {
  static constexpr const char* kScript = R"(
import json, sys
try:
    from prometheus_client.parser import text_string_to_metric_families
except ImportError:
    sys.exit(3)
out = {}
for family in text_string_to_metric_families(open(sys.argv[1]).read()):
    for s in family.samples:
        labels = ",".join('%s="%s"' % (k, v) for k, v in sorted(s.labels.items()))
        out["%s{%s}" % (s.name, labels)] = s.value
print(json.dumps(out))
)";
  const std::string path = dir.Write("metrics.txt", text);
  ProcessResult r = RunProcess({"/usr/bin/python3", "-c", kScript, path});
  if (r.exit_code == 3) return std::nullopt;
  INFO("prometheus_client rejected the body: " << r.err << "\n" << text);
  REQUIRE(r.exit_code == 0);
  std::map<std::string, double> samples;
  const nlohmann::json parsed = nlohmann::json::parse(r.out);
  for (const auto& [key, value] : parsed.items()) samples[key] = value.get<double>();
  return samples;
}

}  // namespace temper::testing
