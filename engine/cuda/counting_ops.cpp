#include "engine/cuda/counting_ops.h"

#include <numeric>

namespace temper::engine::cuda {

const char* OpKindName(OpKind kind) {
  switch (kind) {
    case OpKind::kEmbed:
      return "Embed";
    case OpKind::kRmsNorm:
      return "RmsNorm";
    case OpKind::kQkvNorm:
      return "QkvNorm";
    case OpKind::kNormResidual:
      return "NormResidual";
    case OpKind::kGeglu:
      return "Geglu";
    case OpKind::kGemv:
      return "Gemv";
    case OpKind::kGemvGeglu:
      return "GemvGeglu";
    case OpKind::kToBf16:
      return "ToBf16";
    case OpKind::kGemm:
      return "Gemm";
    case OpKind::kGatherRows:
      return "GatherRows";
    case OpKind::kSoftcap:
      return "Softcap";
    case OpKind::kKvWrite:
      return "KvWrite";
    case OpKind::kAttention:
      return "Attention";
    case OpKind::kTopCandidates:
      return "TopCandidates";
    case OpKind::kAllReduce:
      return "AllReduceSum";
    case OpKind::kCount:
      break;
  }
  return "?";
}

int64_t OpCounts::Total() const { return std::accumulate(n.begin(), n.end(), int64_t{0}); }

std::string OpCounts::Describe() const {
  std::string out;
  for (size_t k = 0; k < n.size(); ++k) {
    if (n[k] == 0) continue;
    if (!out.empty()) out += ", ";
    out += std::string(OpKindName(static_cast<OpKind>(k))) + " " + std::to_string(n[k]);
  }
  return out;
}

int64_t OpCounts::Launches() const { return Total() + (*this)[OpKind::kAttention] + (*this)[OpKind::kTopCandidates]; }

}  // namespace temper::engine::cuda
