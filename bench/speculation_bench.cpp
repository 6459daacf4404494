#include "bench/speculation_bench.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bench/bench_timing.h"
#include "engine/open_backend.h"
#include "engine/serve/openai_conversation.h"
#include "engine/serve/output_history.h"
#include "engine/serve/prompt_lookup.h"
#include "engine/tokenizer/chat_format.h"
#include "engine/tokenizer/tokenizer.h"

namespace temper::engine::bench {

namespace {

using nlohmann::json;
using ::temper::bench::Clock;
using ::temper::bench::Median;
using ::temper::bench::Seconds;

Result<std::string> ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound(fmt::format("cannot open {}", path));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// Gemma 3's tokenizer with Gemma 4's control tokens in place of <unused0>, <unused1>, ... (the
// vocabulary is the same size; only these tokens' ids differ from Gemma 4's).
Result<Tokenizer> StandInTokenizer(const std::string& path) {
  TEMPER_ASSIGN_OR_RETURN(std::string text, ReadText(path));
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.contains("added_tokens") || !j.contains("model") || !j["model"].contains("vocab")) {
    return Status::InvalidArgument(fmt::format("{}: not a tokenizer.json with added_tokens and model.vocab", path));
  }
  static constexpr const char* kControl[] = {"<|turn>",      "<turn|>",          "<|think|>",        "<|channel>",
                                             "<channel|>",   "<|tool>",          "<tool|>",          "<|tool_call>",
                                             "<tool_call|>", "<|tool_response>", "<tool_response|>", "<|\"|>"};
  json& vocab = j["model"]["vocab"];
  int next = 0;
  for (const char* control : kControl) {
    const std::string unused = fmt::format("<unused{}>", next++);
    auto entry = std::find_if(j["added_tokens"].begin(), j["added_tokens"].end(),
                              [&](const json& t) { return t.value("content", "") == unused; });
    if (entry == j["added_tokens"].end() || !vocab.contains(unused)) {
      return Status::InvalidArgument(fmt::format("{}: no {} to give to {}", path, unused, control));
    }
    (*entry)["content"] = control;
    (*entry)["special"] = true;
    vocab[control] = vocab[unused];
    vocab.erase(unused);
  }
  return Tokenizer::FromJson(j.dump());
}

struct Replay {
  std::string role;
  std::vector<int32_t> prompt;
  std::vector<int32_t> reply;
};

// The prompt a role's request renders to, and the tokens of the reply after it (the rendered
// conversation with the reply, past the part it shares with the prompt).
Result<Replay> Render(const ChatFormat& format, const json& line) {
  json request = {{"messages", line.at("messages")}, {"tools", line.value("tools", json(nullptr))}};
  Conversation prompt;
  RequestedToolChoice tool_choice;  // the recorded requests leave it at "auto"
  if (std::optional<ParamError> e = ReadConversation(request, prompt, tool_choice)) {
    return Status::InvalidArgument(fmt::format("{}: {}", e->param, e->message));
  }
  request["messages"].push_back(line.at("answer"));
  Conversation answered;
  if (std::optional<ParamError> e = ReadConversation(request, answered, tool_choice)) {
    return Status::InvalidArgument(fmt::format("answer {}: {}", e->param, e->message));
  }
  answered.add_generation_prompt = false;
  TEMPER_ASSIGN_OR_RETURN(RenderedPrompt p, format.Render(prompt));
  TEMPER_ASSIGN_OR_RETURN(RenderedPrompt a, format.Render(answered));
  const size_t shared =
      static_cast<size_t>(std::mismatch(p.ids.begin(), p.ids.end(), a.ids.begin(), a.ids.end()).first - p.ids.begin());
  Replay r;
  r.role = line.value("role", "?");
  r.prompt = std::move(p.ids);
  r.reply.assign(a.ids.begin() + static_cast<long>(shared), a.ids.end());
  return r;
}

struct Tally {
  int64_t tokens = 0;
  int64_t passes = 0;
  int64_t drafted = 0;
  int64_t history_drafted = 0;   // of drafted, the output history's
  int64_t history_accepted = 0;  // of which the reply agreed with
  void Add(const Tally& o) {
    tokens += o.tokens;
    passes += o.passes;
    drafted += o.drafted;
    history_drafted += o.history_drafted;
    history_accepted += o.history_accepted;
  }
};

// Decodes `r.reply` teacher-forced with prompt-lookup drafts of at most `k` tokens (`adaptive`:
// as many as DraftLength allows, at most k) and, with `history`, the output history's where prompt
// lookup finds none, each source with its own DraftLength, as the scheduler drafts.
Tally Decode(const Replay& r, int k, bool adaptive, const OutputHistory* history = nullptr) {
  PromptLookup lookup(PromptLookupOptions{});
  DraftLength lookup_length(k), history_length(k);
  std::vector<int32_t> text = r.prompt;
  Tally t;
  for (size_t i = 0; i < r.reply.size();) {
    const int left = static_cast<int>(r.reply.size() - i - 1);
    auto most = [&](const DraftLength& length) { return std::min(adaptive ? length.next() : k, left); };
    std::vector<int32_t> draft = lookup.Draft(text, most(lookup_length));
    DraftLength* length = &lookup_length;
    const bool from_history = draft.empty() && history != nullptr;
    if (from_history) {
      draft = history->Draft(text, most(history_length));
      length = &history_length;
    }
    size_t accepted = 0;
    while (accepted < draft.size() && draft[accepted] == r.reply[i + accepted]) ++accepted;
    if (!draft.empty()) length->Update(static_cast<int>(draft.size()), static_cast<int>(accepted));
    if (from_history) {
      t.history_drafted += static_cast<int64_t>(draft.size());
      t.history_accepted += static_cast<int64_t>(accepted);
    }
    text.insert(text.end(), r.reply.begin() + static_cast<long>(i),
                r.reply.begin() + static_cast<long>(i + accepted + 1));
    i += accepted + 1;
    t.tokens += static_cast<int64_t>(accepted) + 1;
    t.drafted += static_cast<int64_t>(draft.size());
    ++t.passes;
  }
  return t;
}

}  // namespace

Status RunLookupAcceptance(const std::string& transcript, const std::string& tokenizer_path) {
  TEMPER_ASSIGN_OR_RETURN(Tokenizer tokenizer, StandInTokenizer(tokenizer_path));
  TEMPER_ASSIGN_OR_RETURN(ChatFormat format, ChatFormat::Create(tokenizer));
  std::ifstream in(transcript);
  if (!in) return Status::NotFound(fmt::format("cannot open transcript {}", transcript));
  std::vector<Replay> replays;
  int line_no = 0, skipped = 0;
  for (std::string line; std::getline(in, line);) {
    ++line_no;
    const json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.contains("messages") || !j.contains("answer")) {
      return Status::InvalidArgument(
          fmt::format("{}:{}: not a transcript line (messages, answer)", transcript, line_no));
    }
    Result<Replay> r = Render(format, j);
    if (!r.ok()) {
      std::fprintf(stderr, "%s:%d: skipped: %s\n", transcript.c_str(), line_no, r.status().ToString().c_str());
      ++skipped;
      continue;
    }
    replays.push_back(std::move(*r));
  }
  if (replays.empty()) return Status::InvalidArgument(fmt::format("{}: no request could be replayed", transcript));

  std::map<std::string, std::vector<const Replay*>> by_role;
  int64_t prompt_tokens = 0, reply_tokens = 0;
  for (const Replay& r : replays) {
    by_role[r.role].push_back(&r);
    by_role["all"].push_back(&r);
    prompt_tokens += static_cast<int64_t>(r.prompt.size());
    reply_tokens += static_cast<int64_t>(r.reply.size());
  }
  std::printf("%zu requests replayed (%d skipped): %.0f prompt and %.0f reply tokens on average\n", replays.size(),
              skipped, static_cast<double>(prompt_tokens) / replays.size(),
              static_cast<double>(reply_tokens) / replays.size());
  std::printf("tokens per pass (accepted drafts + 1), teacher-forced prompt lookup (n-grams %d..%d):\n",
              PromptLookupOptions{}.min_ngram, PromptLookupOptions{}.max_ngram);
  std::printf("%-20s %8s %8s %8s %8s %8s %16s\n", "role", "requests", "k=1", "k=2", "k=4", "k=8", "adaptive (k<=8)");
  for (const auto& [role, list] : by_role) {
    std::printf("%-20s %8zu", role.c_str(), list.size());
    for (int k : {1, 2, 4, 8}) {
      Tally t;
      for (const Replay* r : list) t.Add(Decode(*r, k, /*adaptive=*/false));
      std::printf(" %8.2f", static_cast<double>(t.tokens) / static_cast<double>(t.passes));
    }
    Tally t;
    for (const Replay* r : list) t.Add(Decode(*r, kMaxDraftTokens, /*adaptive=*/true));
    std::printf(" %8.2f (%.1f drafted/pass)\n", static_cast<double>(t.tokens) / static_cast<double>(t.passes),
                static_cast<double>(t.drafted) / static_cast<double>(t.passes));
  }

  // The replies kept as the scheduler keeps them, in the transcript's order: each request drafts
  // from the replies before it.
  const OutputHistoryOptions kept;
  std::printf(
      "\nwith the output history (earlier replies, n-grams %d..%d, after prompt lookup), adaptive k <= %d:\n"
      "%-20s %8s %8s %16s %22s\n",
      kept.min_ngram, kept.max_ngram, kMaxDraftTokens, "role", "requests", "tokens", "drafted/pass",
      "history drafted/taken");
  OutputHistory history(kept);
  std::map<std::string, Tally> with;
  for (const Replay& r : replays) {
    const Tally t = Decode(r, kMaxDraftTokens, /*adaptive=*/true, &history);
    with[r.role].Add(t);
    with["all"].Add(t);
    history.Add(r.prompt, r.reply);
  }
  for (const auto& [role, t] : with) {
    std::printf("%-20s %8zu %8.2f %16.1f %14lld / %lld\n", role.c_str(), by_role[role].size(),
                static_cast<double>(t.tokens) / static_cast<double>(t.passes),
                static_cast<double>(t.drafted) / static_cast<double>(t.passes),
                static_cast<long long>(t.history_drafted), static_cast<long long>(t.history_accepted));
  }
  return Status::OK();
}

Status RunVerifyCost(const LoadedModel& model, const VerifyCostOptions& o) {
  const ModelConfig& config = model.config;
  BackendSpec spec;  // the CPU backend
  spec.threads = o.threads;
  spec.max_context = o.context + kMaxDraftTokens + 1;
  spec.kv.max_sequences = 1;
  spec.kv.max_tokens = spec.max_context;
  TEMPER_ASSIGN_OR_RETURN(std::unique_ptr<Backend> backend, OpenBackend(spec, model));
  std::vector<int32_t> tokens(static_cast<size_t>(o.context + kMaxDraftTokens + 1));
  uint64_t s = 12345;
  for (int32_t& t : tokens)
    t = static_cast<int32_t>(((s = s * 6364136223846793005ull + 1442695040888963407ull) >> 33) % config.vocab_size);
  TEMPER_ASSIGN_OR_RETURN(SequenceId seq, backend->AddSequence());
  ForwardItem prefill{seq, std::span<const int32_t>(tokens).first(static_cast<size_t>(o.context)), false};
  TEMPER_RETURN_IF_ERROR(backend->Forward({&prefill, 1}, {}).status());

  // A pass of n tokens at the context, then truncated back, so every pass sees the same context.
  auto pass_ms = [&](int n) -> Result<double> {
    std::vector<double> ms;
    for (int rep = 0; rep < o.reps + 1; ++rep) {
      ForwardItem item{seq, std::span<const int32_t>(tokens).subspan(static_cast<size_t>(o.context), n),
                       /*all_logits=*/n > 1};
      const auto t0 = Clock::now();
      TEMPER_RETURN_IF_ERROR(backend->Forward({&item, 1}, {}).status());
      if (rep > 0) ms.push_back(1e3 * Seconds(t0, Clock::now()));  // the first faults pages in
      TEMPER_RETURN_IF_ERROR(backend->Truncate(seq, o.context));
    }
    return Median(ms);
  };
  TEMPER_ASSIGN_OR_RETURN(const double step, pass_ms(1));
  std::printf("verification pass cost, CPU backend, %d threads, context %d: decode step %.1f ms\n", o.threads,
              o.context, step);
  std::printf("%4s %12s %18s\n", "k", "pass ms", "x decode step");
  for (int k : {1, 2, 4, 8}) {
    TEMPER_ASSIGN_OR_RETURN(const double ms, pass_ms(1 + k));
    std::printf("%4d %12.1f %18.2f\n", k, ms, ms / step);
  }
  if (!model.drafter) return Status::OK();

  // The drafter starts from the hidden state of the sequence's last row: feed one token more,
  // then draft (which changes nothing, so every timing sees the same state).
  ForwardItem next{seq, std::span<const int32_t>(tokens).subspan(static_cast<size_t>(o.context), 1), false};
  TEMPER_RETURN_IF_ERROR(backend->Forward({&next, 1}, {}).status());
  std::printf("MTP draft steps, one Draft call (drafter hidden %d, %d layers):\n",
              model.drafter->config().text.hidden_size, model.drafter->num_layers());
  std::printf("%4s %12s %18s\n", "k", "draft ms", "x decode step");
  for (int k : {1, 2, 4, 8}) {
    const DraftRequest request{seq, tokens[static_cast<size_t>(o.context) + 1], 0, k};
    std::vector<double> ms;
    for (int rep = 0; rep < o.reps + 1; ++rep) {
      const auto t0 = Clock::now();
      TEMPER_RETURN_IF_ERROR(backend->Draft({&request, 1}, {}).status());
      if (rep > 0) ms.push_back(1e3 * Seconds(t0, Clock::now()));
    }
    std::printf("%4d %12.1f %18.2f\n", k, Median(ms), Median(ms) / step);
  }
  return Status::OK();
}

}  // namespace temper::engine::bench
