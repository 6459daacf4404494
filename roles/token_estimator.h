// Token counting for prompt budgets. A client that has the model's tokenizer counts with it
// (ModelClient::token_counter: the inprocess endpoint); for the others BytesTokenEstimator
// over-counts on purpose, so an assembled prompt never overflows the context: Gemma's 262k
// vocabulary averages about 4 bytes per token on English prose and 3 or more on shell and paths,
// so 3 bytes per token errs on the safe side.
// Thread safety: Count() is const and must be safe to call concurrently.
#pragma once

#include <cstddef>
#include <string_view>

namespace temper {

class TokenEstimator {
 public:
  virtual ~TokenEstimator() = default;
  virtual size_t Count(std::string_view text) const = 0;
};

class BytesTokenEstimator final : public TokenEstimator {
 public:
  explicit BytesTokenEstimator(size_t bytes_per_token = 3) : bytes_per_token_(bytes_per_token ? bytes_per_token : 1) {}
  size_t Count(std::string_view text) const override { return (text.size() + bytes_per_token_ - 1) / bytes_per_token_; }

 private:
  const size_t bytes_per_token_;
};

}  // namespace temper
