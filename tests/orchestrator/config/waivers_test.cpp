#include "orchestrator/config/waivers.h"

#include <catch2/catch.hpp>

namespace temper {
namespace {

const std::string kPrefix = "xccdf_org.ssgproject.content_rule_";

TEST_CASE("expiry dates are UTC days, checked against the calendar") {
  CHECK(ParseExpiryDate("1970-01-01").value() == 0);
  CHECK(ParseExpiryDate("2027-01-31").value() == 1801353600000);
  CHECK(ParseExpiryDate("2028-02-29").ok());  // a leap day
  CHECK(ParseExpiryDate("2027-02-29").status().message() == "'2027-02-29' is not a calendar date after 1970");
  CHECK(ParseExpiryDate("2027-13-01").status().message() == "'2027-13-01' is not a calendar date after 1970");
  CHECK(ParseExpiryDate("1969-12-31").status().message() == "'1969-12-31' is not a calendar date after 1970");
  for (const char* bad : {"2027-1-31", "31-01-2027", "2027/01/31", "", "tomorrow", "2027-01-31T00:00"}) {
    INFO(bad);
    CHECK(ParseExpiryDate(bad).status().code() == StatusCode::kInvalidArgument);
  }
  CHECK(FormatExpiry(*ParseExpiryDate("2027-01-31")) == "2027-01-31");
  CHECK(FormatExpiry(1801353600000 + 3723000) == "2027-01-31 01:02:03Z");
}

TEST_CASE("the --waive flag reads RULE:REASON:OWNER[:YYYY-MM-DD], the reason may hold colons") {
  auto w = ParseWaiverFlag("accounts_tmout:kiosk sessions: no timeout (SEC-1):alice@example.com:2027-01-31");
  REQUIRE(w.ok());
  CHECK(w->rule_id == kPrefix + "accounts_tmout");
  CHECK(w->reason == "kiosk sessions: no timeout (SEC-1)");
  CHECK(w->owner == "alice@example.com");
  CHECK(w->expires_at == 1801353600000);

  auto open_ended = ParseWaiverFlag(kPrefix + "banner_etc_issue_net:legal review:bob");
  REQUIRE(open_ended.ok());
  CHECK(open_ended->rule_id == kPrefix + "banner_etc_issue_net");
  CHECK(open_ended->owner == "bob");
  CHECK_FALSE(open_ended->expires_at.has_value());

  CHECK(ParseWaiverFlag("accounts_tmout").status().message() ==
        "--waive 'accounts_tmout': no reason or owner (expected RULE:REASON:OWNER[:YYYY-MM-DD])");
  CHECK(ParseWaiverFlag("accounts_tmout:reason only").status().message() ==
        "--waive 'accounts_tmout:reason only': no owner (expected RULE:REASON:OWNER[:YYYY-MM-DD])");
  CHECK(ParseWaiverFlag("accounts_tmout::alice").status().message() ==
        "--waive 'accounts_tmout::alice': reason: required (expected RULE:REASON:OWNER[:YYYY-MM-DD])");
  CHECK(ParseWaiverFlag("accounts_tmout:why:").status().message() ==
        "--waive 'accounts_tmout:why:': owner: required (expected RULE:REASON:OWNER[:YYYY-MM-DD])");
  CHECK(ParseWaiverFlag("accounts_tmout:why:alice:2027-02-30").status().message() ==
        "--waive 'accounts_tmout:why:alice:2027-02-30': '2027-02-30' is not a calendar date after 1970 (expected "
        "RULE:REASON:OWNER[:YYYY-MM-DD])");
  CHECK_THAT(ParseWaiverFlag("bad rule:why:alice").status().message(),
             Catch::StartsWith("--waive 'bad rule:why:alice': 'bad rule' is not a rule id"));
  // A last field that is not a date is the owner, not a malformed expiry.
  auto owner_like = ParseWaiverFlag("accounts_tmout:why:team 2027");
  REQUIRE(owner_like.ok());
  CHECK(owner_like->owner == "team 2027");
}

TEST_CASE("a batch's waivers replace configured ones for the same rule") {
  std::vector<Waiver> configured = {{kPrefix + "a", "site", "ops", std::nullopt},
                                    {kPrefix + "b", "site", "ops", std::nullopt},
                                    {kPrefix + "c", "site", "ops", std::nullopt}};
  std::vector<Waiver> batch = {{kPrefix + "a", "batch", "alice", std::nullopt},
                               {kPrefix + "z", "batch, rule not listed", "alice", std::nullopt}};
  auto merged = MergeWaivers(configured, batch, {kPrefix + "a", kPrefix + "b"}, false);
  REQUIRE(merged.size() == 3);
  CHECK(merged[0].rule_id == kPrefix + "a");
  CHECK(merged[0].reason == "batch");
  CHECK(merged[1].rule_id == kPrefix + "z");
  CHECK(merged[2].rule_id == kPrefix + "b");
  CHECK(merged[2].reason == "site");
  CHECK(MergeWaivers(configured, batch, {}, true).size() == 4);  // whole profile: c applies too
  CHECK(MergeWaivers(configured, {}, {kPrefix + "c"}, false).size() == 1);
}

}  // namespace
}  // namespace temper
