#include "orchestrator/message_chunks.h"

#include <google/protobuf/util/message_differencer.h>
#include <catch2/catch.hpp>

#include <string>
#include <vector>

namespace temper {
namespace {

using temper::v1::BatchReport;
using temper::v1::BatchReportChunk;

constexpr size_t kSmall = 4096;  // a chunk's bytes in these tests, so a small report needs many
// What a chunk may take beyond max_bytes: the oneof's tag and length, a fragment's offsets.
constexpr size_t kFraming = 32;

// A report with every kind of item, in every size: attempts far below a chunk, near it, and one
// many times over it (the one that must go as fragments).
BatchReport SampleReport() {
  BatchReport r;
  r.mutable_batch()->set_id("7");
  r.mutable_batch()->set_state(temper::v1::BATCH_STATE_COMPLETED);
  r.mutable_batch()->set_start_snapshot(0);  // a set optional zero must survive the merge
  r.set_results_dir("/var/lib/temper/results/batch-7/after");
  for (int i = 0; i < 3; ++i) r.mutable_batch()->add_waivers()->set_rule_id("waived_" + std::to_string(i));
  r.add_fixpoint_passes()->set_pass(1);
  for (int i = 0; i < 40; ++i) {
    temper::v1::BatchRule* rule = r.mutable_batch()->add_rules();
    rule->set_rule_id("rule_" + std::to_string(i));
    rule->set_detail(std::string(static_cast<size_t>(i) * 50, 'd'));
  }
  for (int i = 0; i < 30; ++i) {
    temper::v1::Attempt* a = r.add_attempts();
    a->set_id(i + 1);
    a->set_rule_id("rule_" + std::to_string(i % 7));
    a->set_number(static_cast<uint32_t>(i / 7 + 1));
    a->add_commands("echo " + std::to_string(i));
    a->set_changes_json(std::string(i == 17 ? 10 * kSmall + 123 : static_cast<size_t>(i) * 150, 'c'));
  }
  r.add_lessons()->set_text("a lesson");
  return r;
}

// The report cut into items the way the daemon adds them: one per field value.
std::vector<BatchReport> Items(const BatchReport& whole) {
  std::vector<BatchReport> items;
  BatchReport head = whole;
  head.mutable_batch()->clear_rules();
  head.mutable_batch()->clear_waivers();
  head.clear_attempts();
  head.clear_lessons();
  head.clear_fixpoint_passes();
  items.push_back(head);
  for (const auto& w : whole.batch().waivers()) *items.emplace_back().mutable_batch()->add_waivers() = w;
  for (const auto& p : whole.fixpoint_passes()) *items.emplace_back().add_fixpoint_passes() = p;
  for (const auto& rule : whole.batch().rules()) *items.emplace_back().mutable_batch()->add_rules() = rule;
  for (const auto& a : whole.attempts()) *items.emplace_back().add_attempts() = a;
  for (const auto& l : whole.lessons()) *items.emplace_back().add_lessons() = l;
  return items;
}

std::vector<BatchReportChunk> Pack(const BatchReport& whole, size_t max_bytes) {
  std::vector<BatchReportChunk> chunks;
  ChunkPacker<BatchReportChunk> packer(
      [&chunks](const BatchReportChunk& c) {
        chunks.push_back(c);
        return true;
      },
      max_bytes);
  for (const BatchReport& item : Items(whole)) REQUIRE(packer.Add(item));
  REQUIRE(packer.Flush());
  return chunks;
}

Result<BatchReport> Assemble(const std::vector<BatchReportChunk>& chunks) {
  ChunkAssembler<BatchReportChunk> assembler;
  for (const BatchReportChunk& c : chunks) TEMPER_RETURN_IF_ERROR(assembler.Add(c));
  return std::move(assembler).Finish();
}

BatchReportChunk Fragment(uint64_t total, uint64_t offset, const std::string& data) {
  BatchReportChunk c;
  c.mutable_fragment()->set_total_bytes(total);
  c.mutable_fragment()->set_offset(offset);
  c.mutable_fragment()->set_data(data);
  return c;
}

TEST_CASE("a report packed into chunks bounded by bytes assembles to the same report") {
  const BatchReport whole = SampleReport();
  REQUIRE(whole.ByteSizeLong() > 10 * kSmall);
  for (size_t max_bytes : {kSmall, 3 * kSmall, size_t{1} << 20}) {
    INFO("max_bytes " << max_bytes);
    std::vector<BatchReportChunk> chunks = Pack(whole, max_bytes);
    size_t fragments = 0;
    for (const BatchReportChunk& c : chunks) {
      CHECK(c.ByteSizeLong() <= max_bytes + kFraming);
      if (c.has_fragment()) ++fragments;
    }
    if (max_bytes < (size_t{1} << 20)) {
      CHECK(chunks.size() > whole.ByteSizeLong() / max_bytes);
      CHECK(fragments >= (10 * kSmall) / max_bytes);  // the one attempt over max_bytes, in pieces
    } else {
      CHECK(chunks.size() == 1);  // a report that fits one chunk is one message, as before
      CHECK(fragments == 0);
    }
    // The first chunk is a part with the batch's own fields: a client can show them first.
    REQUIRE(chunks[0].has_part());
    CHECK(chunks[0].part().batch().id() == "7");
    Result<BatchReport> assembled = Assemble(chunks);
    REQUIRE(assembled.ok());
    std::string diff;
    google::protobuf::util::MessageDifferencer differ;
    differ.ReportDifferencesToString(&diff);
    CHECK(differ.Compare(whole, *assembled));
    CHECK(diff.empty());
    CHECK(assembled->batch().has_start_snapshot());
    CHECK(assembled->attempts(17).changes_json().size() == 10 * kSmall + 123);
  }
}

TEST_CASE("a packer whose client went away sends nothing more") {
  int sends = 0;
  ChunkPacker<BatchReportChunk> packer([&sends](const BatchReportChunk&) { return ++sends < 2; }, kSmall);
  std::vector<BatchReport> items = Items(SampleReport());
  size_t added = 0;
  while (added < items.size() && packer.Add(items[added])) ++added;
  CHECK(sends == 2);
  CHECK(added < items.size());
  CHECK_FALSE(packer.Add(items.back()));
  CHECK_FALSE(packer.Flush());
  CHECK(sends == 2);
}

TEST_CASE("an assembler refuses chunks that do not follow, naming what is wrong") {
  std::vector<BatchReportChunk> chunks = Pack(SampleReport(), kSmall);
  size_t first_fragment = 0;
  while (!chunks[first_fragment].has_fragment()) ++first_fragment;
  const uint64_t total = chunks[first_fragment].fragment().total_bytes();

  SECTION("a fragment missing in the middle") {
    chunks.erase(chunks.begin() + static_cast<long>(first_fragment) + 1);
    Result<BatchReport> r = Assemble(chunks);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == StatusCode::kDataLoss);
    CHECK(r.status().message() == fmt::format("BatchReport stream: a fragment of {} bytes at offset {} of {} does not "
                                              "follow the {} of {} bytes received",
                                              kSmall, 2 * kSmall, total, kSmall, total));
  }
  SECTION("the stream ends inside a fragmented part") {
    chunks.resize(first_fragment + 2);
    Result<BatchReport> r = Assemble(chunks);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().message() ==
          fmt::format("BatchReport stream: it ended after {} of the {} bytes of a fragmented part", 2 * kSmall, total));
  }
  SECTION("a part inside a fragmented one") {
    REQUIRE(chunks[first_fragment - 1].has_part());
    std::swap(chunks[first_fragment - 1], chunks[first_fragment]);
    Result<BatchReport> r = Assemble(chunks);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().message() ==
          fmt::format("BatchReport stream: a part came after {} of the {} bytes of a fragmented one", kSmall, total));
  }
  SECTION("fragments whose bytes are not a part") {
    Result<BatchReport> r = Assemble({Fragment(4, 0, "\xff\xff"), Fragment(4, 2, "\xff\xff")});
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().message() == "BatchReport stream: the 4 bytes of a fragmented part do not parse as a BatchReport");
  }
  SECTION("a fragment longer than its total, or empty") {
    CHECK_FALSE(Assemble({Fragment(2, 0, "abc")}).ok());
    CHECK_FALSE(Assemble({Fragment(2, 0, "")}).ok());
    CHECK_FALSE(Assemble({Fragment(4, 0, "ab"), Fragment(5, 2, "ab")}).ok());  // the total changed
  }
  SECTION("a chunk with neither part nor fragment") {
    Result<BatchReport> r = Assemble({BatchReportChunk()});
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().message() ==
          "BatchReport stream: a chunk with neither part nor fragment (is temperd newer than this client?)");
  }
}

TEST_CASE("a page budget takes items while they fit, and always the first") {
  PageBudget budget(100, 1000);
  CHECK(budget.Take(2000));  // the first item, however large: a page always makes progress
  CHECK_FALSE(budget.Take(1));
  PageBudget room(100, 1000);
  CHECK(room.Take(500 - kItemFramingBytes));
  CHECK(room.Take(400 - kItemFramingBytes));
  CHECK_FALSE(room.Take(1));  // 1000 used: nothing more
}

TEST_CASE("a page token is a position in the list it came from") {
  CHECK(*PagePosition("", 3, "page_token") == 0);
  CHECK(*PagePosition("2", 3, "page_token") == 2);
  CHECK(*PagePosition("3", 3, "page_token") == 3);
  for (const char* bad : {"4", "-1", "x", "1x", " 1"}) {
    INFO(bad);
    Result<size_t> r = PagePosition(bad, 3, "rules_page_token");
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == StatusCode::kInvalidArgument);
    CHECK(r.status().message() == "rules_page_token: not a token this server issued");
  }
}

}  // namespace
}  // namespace temper
