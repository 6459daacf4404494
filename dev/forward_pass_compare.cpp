// Experiment (issue 48): could the CPU backend's own forward pass (engine/cpu/forward.cpp) give way
// to the device backend's pass (engine/cuda/rank_forward.cpp) over ReferenceOps, the CPU twin of
// every kernel, so that the engine has one forward pass with ops per backend, as ggml has one graph?
// The rule: only if the CPU backend's speed stays within 5%. This times both on the same synthetic
// model, same prompt and same greedy steps, and checks they compute the same thing first.
//
//   forward_pass_compare CONFIG.json [PROMPT_TOKENS] [DECODE_STEPS]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "engine/backend.h"
#include "engine/cuda/device_backend.h"
#include "engine/cuda/reference_ops.h"
#include "engine/loaded_model.h"
#include "engine/open_backend.h"

namespace temper::engine {
namespace {

using Clock = std::chrono::steady_clock;

struct Timing {
  double prefill_tok_s = 0, decode_tok_s = 0;
  std::vector<int32_t> tokens;  // greedy
};

int32_t Greedy(const std::vector<float>& logits) {
  return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

Result<Timing> Time(Backend& backend, const std::vector<int32_t>& prompt, int steps) {
  Timing t;
  TEMPER_ASSIGN_OR_RETURN(SequenceId seq, backend.AddSequence());
  ForwardItem item{seq, prompt, false};
  auto t0 = Clock::now();
  TEMPER_ASSIGN_OR_RETURN(ForwardResult r, backend.Forward({&item, 1}, {}));
  t.prefill_tok_s = prompt.size() / std::chrono::duration<double>(Clock::now() - t0).count();
  int32_t token = Greedy(r.logits);
  t.tokens.push_back(token);
  t0 = Clock::now();
  for (int i = 0; i < steps; ++i) {
    ForwardItem step{seq, {&token, 1}, false};
    TEMPER_ASSIGN_OR_RETURN(r, backend.Forward({&step, 1}, {}));
    token = Greedy(r.logits);
    t.tokens.push_back(token);
  }
  t.decode_tok_s = steps / std::chrono::duration<double>(Clock::now() - t0).count();
  return t;
}

Status Run(const std::string& config, int prompt_tokens, int steps) {
  TEMPER_ASSIGN_OR_RETURN(
      LoadedModel model,
      LoadModel(ModelSource{.synthetic_config = config, .synthetic_seed = 1, .tokenizer_need = TokenizerNeed::kNone}));
  std::vector<int32_t> prompt(static_cast<size_t>(prompt_tokens));
  uint64_t s = 12345;
  for (int32_t& tok : prompt)
    tok =
        static_cast<int32_t>((s = s * 6364136223846793005ull + 1442695040888963407ull) >> 33) % model.config.vocab_size;
  const int64_t context = prompt_tokens + steps + 1;
  const int threads = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));

  BackendSpec spec;
  spec.tp = 1;
  spec.threads = threads;
  spec.max_context = context;
  spec.kv.max_sequences = 1;
  spec.kv.max_tokens = context;
  spec.use_drafter = false;
  TEMPER_ASSIGN_OR_RETURN(std::unique_ptr<Backend> cpu, OpenBackend(spec, model));
  TEMPER_ASSIGN_OR_RETURN(Timing a, Time(*cpu, prompt, steps));
  cpu.reset();

  Communicator comm(1);
  std::vector<std::unique_ptr<cuda::RankOps>> ops;
  ops.push_back(std::make_unique<cuda::ReferenceOps>(comm, 0, size_t{24} << 30));
  cuda::DeviceBackendOptions options;
  options.max_context = context;
  options.kv.max_sequences = 1;
  options.kv.max_tokens = context;
  options.top_candidates = 0;  // full logit rows, as the CPU backend returns
  TEMPER_ASSIGN_OR_RETURN(std::unique_ptr<cuda::DeviceBackend> twin,
                          cuda::DeviceBackend::Create(model.config, model.weights, std::move(ops), options));
  TEMPER_ASSIGN_OR_RETURN(Timing b, Time(*twin, prompt, steps));

  size_t same = 0;
  while (same < a.tokens.size() && a.tokens[same] == b.tokens[same]) ++same;
  std::printf("model %s: %.2f B parameters, %d prompt tokens, %d decode steps, %d threads\n", config.c_str(),
              model.config.ParameterCount() / 1e9, prompt_tokens, steps, threads);
  std::printf("CPU backend (engine/cpu/forward.cpp):              prefill %8.1f tok/s, decode %6.2f tok/s\n",
              a.prefill_tok_s, a.decode_tok_s);
  std::printf("device backend over ReferenceOps (rank_forward):   prefill %8.1f tok/s, decode %6.2f tok/s\n",
              b.prefill_tok_s, b.decode_tok_s);
  std::printf("the second's speed: prefill %.1f%%, decode %.1f%% of the first; greedy tokens equal for %zu of %zu\n",
              100 * b.prefill_tok_s / a.prefill_tok_s, 100 * b.decode_tok_s / a.decode_tok_s, same, a.tokens.size());
  return Status::OK();
}

}  // namespace
}  // namespace temper::engine

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s CONFIG.json [PROMPT_TOKENS] [DECODE_STEPS]\n", argv[0]);
    return 2;
  }
  const int prompt = argc > 2 ? std::atoi(argv[2]) : 64;
  const int steps = argc > 3 ? std::atoi(argv[3]) : 8;
  temper::Status s = temper::engine::Run(argv[1], prompt, steps);
  if (!s.ok()) {
    std::fprintf(stderr, "%s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}
