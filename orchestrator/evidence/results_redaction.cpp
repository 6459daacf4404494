#include "orchestrator/evidence/results_redaction.h"

#include "orchestrator/evidence/markup_escape.h"
#include "stig/change_set_redaction.h"

namespace temper::evidence {
namespace {

// True when the name of the tag that ends just before `at` (the '>' of "<NAME>") is `password`,
// with or without a namespace prefix.
bool PasswordTagEndsAt(std::string_view xml, std::size_t at, std::size_t& name_start) {
  constexpr std::string_view kName = "password";
  if (at < kName.size() + 1 || xml.substr(at - kName.size(), kName.size()) != kName) return false;
  std::size_t i = at - kName.size();
  if (xml[i - 1] == ':') {
    std::size_t p = i - 1;
    while (p > 0 && xml[p - 1] != '<' && xml[p - 1] != '/' && xml[p - 1] != ' ' && xml[p - 1] != '>') --p;
    i = p;
  }
  if (i == 0 || xml[i - 1] != '<') return false;
  name_start = i;
  return true;
}

}  // namespace

std::string RedactPasswordElements(std::string_view xml) {
  std::string out;
  out.reserve(xml.size());
  std::size_t copied = 0;
  for (std::size_t gt = xml.find('>'); gt != std::string_view::npos; gt = xml.find('>', gt + 1)) {
    std::size_t name_start = 0;
    if (!PasswordTagEndsAt(xml, gt, name_start)) continue;
    const std::string_view name = xml.substr(name_start, gt - name_start);
    const std::string closing = "</" + std::string(name) + ">";
    const std::size_t end = xml.find(closing, gt + 1);
    if (end == std::string_view::npos) continue;
    const std::string_view value = xml.substr(gt + 1, end - gt - 1);
    if (value.find('<') != std::string_view::npos) continue;  // not a text element
    if (value.ends_with(" hash redacted&gt;")) continue;      // redacted already
    out.append(xml.substr(copied, gt + 1 - copied));
    out += MarkupEscape(stig::RedactHash(value));
    copied = end;
    gt = end;
  }
  out.append(xml.substr(copied));
  return out;
}

void RedactPasswordFields(std::vector<stig::RuleEvidence>& evidence) {
  for (stig::RuleEvidence& rule : evidence) {
    for (stig::OvalDefinition& definition : rule.definitions) {
      for (stig::OvalTest& test : definition.tests) {
        for (stig::OvalItem& item : test.items) {
          for (auto& [name, value] : item.fields) {
            if (name == "password") value = stig::RedactHash(value);
          }
        }
      }
    }
  }
}

}  // namespace temper::evidence
