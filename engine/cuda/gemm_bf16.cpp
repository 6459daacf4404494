#include "engine/cuda/gemm_bf16.h"

#include <cublasLt.h>
#include <dlfcn.h>

#include <cstdlib>
#include <string>
#include <type_traits>
#include <vector>

#include "engine/cuda/cuda_status.h"

namespace temper::engine::cuda {
namespace {

// cuBLAS's own status names live in libcublas, which is not linked; these are cublas_api.h's.
const char* StatusName(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_NOT_INITIALIZED:
      return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED:
      return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE:
      return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH:
      return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_EXECUTION_FAILED:
      return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR:
      return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return "CUBLAS_STATUS_NOT_SUPPORTED";
    default:
      return "cuBLAS status";
  }
}

Status LtStatus(cublasStatus_t s, const char* what) {
  if (s == CUBLAS_STATUS_SUCCESS) return Status::OK();
  return Status::Internal(std::string("cuBLASLt: ") + what + " failed: " + StatusName(s) + " (" +
                          std::to_string(static_cast<int>(s)) + ")");
}

#define TEMPER_LT_TRY(expr)                           \
  do {                                                \
    const cublasStatus_t temper_lt_status_ = (expr);  \
    if (temper_lt_status_ != CUBLAS_STATUS_SUCCESS) { \
      return LtStatus(temper_lt_status_, #expr);      \
    }                                                 \
  } while (0)

}  // namespace

// cuBLASLt's entry points, loaded with dlopen as NCCL is (all_reduce.cu): a build with CUDA then
// needs NVIDIA's 540 MB library only on a host that runs the engine on GPUs, so the same temperd
// (and its Debian package) runs on hosts without it, and a missing library is named when a GPU is
// asked for. The types come from cublasLt.h; only the symbols are looked up.
struct GemmBf16::Library {
  void* handle = nullptr;
  decltype(&cublasLtCreate) create = nullptr;
  decltype(&cublasLtDestroy) destroy = nullptr;
  decltype(&cublasLtMatmul) matmul = nullptr;
  decltype(&cublasLtMatmulAlgoGetHeuristic) algo_get_heuristic = nullptr;
  decltype(&cublasLtMatmulDescCreate) desc_create = nullptr;
  decltype(&cublasLtMatmulDescDestroy) desc_destroy = nullptr;
  decltype(&cublasLtMatmulDescSetAttribute) desc_set_attribute = nullptr;
  decltype(&cublasLtMatmulPreferenceCreate) preference_create = nullptr;
  decltype(&cublasLtMatmulPreferenceDestroy) preference_destroy = nullptr;
  decltype(&cublasLtMatmulPreferenceSetAttribute) preference_set_attribute = nullptr;
  decltype(&cublasLtMatrixLayoutCreate) layout_create = nullptr;
  decltype(&cublasLtMatrixLayoutDestroy) layout_destroy = nullptr;

  ~Library() {
    if (handle) dlclose(handle);
  }

  // TEMPER_CUBLASLT_LIBRARY when set; else libcublasLt of the CUDA major version built against,
  // through the loader's path, then in the toolkit's directory the build used (where the linked
  // library was found before it was loaded at run time).
  static Result<std::unique_ptr<Library>> Load() {
    auto lib = std::make_unique<Library>();
    const char* env = std::getenv("TEMPER_CUBLASLT_LIBRARY");
    const std::string soname = "libcublasLt.so." + std::to_string(CUBLAS_VER_MAJOR);
    std::vector<std::string> names = {soname, std::string(TEMPER_CUDA_LIBRARY_DIR) + "/" + soname};
    if (env && *env) names = {env};
    std::string errors;
    for (const std::string& name : names) {
      lib->handle = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (lib->handle) break;
      errors += std::string(errors.empty() ? "" : "; ") + dlerror();
    }
    if (!lib->handle) {
      return Status::NotFound("cuBLASLt: cannot load " + names.front() + " (NVIDIA's CUDA " +
                              std::to_string(CUBLAS_VER_MAJOR) + " libraries, needed to run on GPUs): " + errors);
    }
    const std::string& name = names.front();
    bool complete = true;
    auto bind = [&](auto& fn, const char* symbol) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib->handle, symbol));
      complete = complete && fn != nullptr;
    };
    bind(lib->create, "cublasLtCreate");
    bind(lib->destroy, "cublasLtDestroy");
    bind(lib->matmul, "cublasLtMatmul");
    bind(lib->algo_get_heuristic, "cublasLtMatmulAlgoGetHeuristic");
    bind(lib->desc_create, "cublasLtMatmulDescCreate");
    bind(lib->desc_destroy, "cublasLtMatmulDescDestroy");
    bind(lib->desc_set_attribute, "cublasLtMatmulDescSetAttribute");
    bind(lib->preference_create, "cublasLtMatmulPreferenceCreate");
    bind(lib->preference_destroy, "cublasLtMatmulPreferenceDestroy");
    bind(lib->preference_set_attribute, "cublasLtMatmulPreferenceSetAttribute");
    bind(lib->layout_create, "cublasLtMatrixLayoutCreate");
    bind(lib->layout_destroy, "cublasLtMatrixLayoutDestroy");
    if (!complete) return Status::NotFound("cuBLASLt: " + name + " lacks an entry point temper uses");
    return Result<std::unique_ptr<Library>>(std::move(lib));
  }
};

// Descriptors and the chosen algorithm of one cached shape.
struct GemmBf16::Plan {
  const Library& lt;
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  explicit Plan(const Library& library) : lt(library) {}
  ~Plan() {
    if (a) lt.layout_destroy(a);
    if (b) lt.layout_destroy(b);
    if (c) lt.layout_destroy(c);
    if (op) lt.desc_destroy(op);
  }
};

Result<std::unique_ptr<GemmBf16>> GemmBf16::Create(size_t workspace_bytes) {
  std::unique_ptr<GemmBf16> g(new GemmBf16());
  TEMPER_ASSIGN_OR_RETURN(g->lt_, Library::Load());
  cublasLtHandle_t handle = nullptr;
  TEMPER_LT_TRY(g->lt_->create(&handle));
  g->handle_ = handle;
  if (workspace_bytes > 0) TEMPER_CUDA_TRY(cudaMalloc(&g->workspace_, workspace_bytes));
  g->workspace_bytes_ = workspace_bytes;
  return g;
}

GemmBf16::GemmBf16() = default;

GemmBf16::~GemmBf16() {
  plans_.clear();
  if (workspace_) cudaFree(workspace_);
  if (handle_) lt_->destroy(static_cast<cublasLtHandle_t>(handle_));
}

Result<const GemmBf16::Plan*> GemmBf16::PlanFor(const GemmShape& key) {
  auto it = plans_.find(key);
  if (it != plans_.end()) return it->second.get();
  const auto [rows, in, out, ldx, ldw, ldy, align_x, align_w, align_y] = key;
  auto plan = std::make_unique<Plan>(*lt_);
  TEMPER_LT_TRY(lt_->desc_create(&plan->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t transpose = CUBLAS_OP_T, none = CUBLAS_OP_N;
  TEMPER_LT_TRY(lt_->desc_set_attribute(plan->op, CUBLASLT_MATMUL_DESC_TRANSA, &transpose, sizeof transpose));
  TEMPER_LT_TRY(lt_->desc_set_attribute(plan->op, CUBLASLT_MATMUL_DESC_TRANSB, &none, sizeof none));
  // Column-major views: w is in × out (ld ldw), x is in × rows (ld ldx), yᵀ is out × rows (ld ldy).
  TEMPER_LT_TRY(lt_->layout_create(&plan->a, CUDA_R_16BF, in, out, ldw));
  TEMPER_LT_TRY(lt_->layout_create(&plan->b, CUDA_R_16BF, in, rows, ldx));
  TEMPER_LT_TRY(lt_->layout_create(&plan->c, CUDA_R_32F, out, rows, ldy));

  cublasLtMatmulPreference_t pref = nullptr;
  TEMPER_LT_TRY(lt_->preference_create(&pref));
  const uint64_t ws = workspace_bytes_;
  const uint32_t ax = static_cast<uint32_t>(align_x), aw = static_cast<uint32_t>(align_w),
                 ay = static_cast<uint32_t>(align_y);
  cublasStatus_t s = lt_->preference_set_attribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
  if (s == CUBLAS_STATUS_SUCCESS)
    s = lt_->preference_set_attribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &aw, sizeof aw);
  if (s == CUBLAS_STATUS_SUCCESS)
    s = lt_->preference_set_attribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &ax, sizeof ax);
  if (s == CUBLAS_STATUS_SUCCESS)
    s = lt_->preference_set_attribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &ay, sizeof ay);
  if (s == CUBLAS_STATUS_SUCCESS)
    s = lt_->preference_set_attribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &ay, sizeof ay);
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  if (s == CUBLAS_STATUS_SUCCESS) {
    s = lt_->algo_get_heuristic(static_cast<cublasLtHandle_t>(handle_), plan->op, plan->a, plan->b, plan->c, plan->c,
                                pref, 1, &result, &found);
  }
  lt_->preference_destroy(pref);
  TEMPER_LT_TRY(s);
  if (found == 0) {
    return Status::NotFound("cuBLASLt has no bf16 algorithm for " + std::to_string(rows) + " x " + std::to_string(in) +
                            " -> " + std::to_string(out) + " (leading dimensions " + std::to_string(ldx) + ", " +
                            std::to_string(ldw) + ", " + std::to_string(ldy) + ")");
  }
  plan->algo = result.algo;
  return plans_.emplace(key, std::move(plan)).first->second.get();
}

Status GemmBf16::Run(const uint16_t* x, int64_t ldx, const uint16_t* w, int64_t ldw, float* y, int64_t ldy, int rows,
                     int in, int out, cudaStream_t stream) {
  if (rows < 1 || in < 1 || out < 1 || ldx < in || ldw < in || ldy < out) {
    return Status::InvalidArgument("GEMM: " + std::to_string(rows) + " x " + std::to_string(in) + " -> " +
                                   std::to_string(out) + " with leading dimensions " + std::to_string(ldx) + ", " +
                                   std::to_string(ldw) + ", " + std::to_string(ldy) + " is not a valid shape");
  }
  TEMPER_ASSIGN_OR_RETURN(const Plan* plan, PlanFor(GemmShapeOf(x, ldx, w, ldw, y, ldy, rows, in, out)));
  const float alpha = 1.0f, beta = 0.0f;
  TEMPER_LT_TRY(lt_->matmul(static_cast<cublasLtHandle_t>(handle_), plan->op, &alpha, w, plan->a, x, plan->b, &beta, y,
                            plan->c, y, plan->c, &plan->algo, workspace_, workspace_bytes_, stream));
  return Status::OK();
}

}  // namespace temper::engine::cuda
