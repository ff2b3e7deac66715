// Torch adapters of the launchers in hot_kernels.h: each checks device, dtype, contiguity and shape, allocates
// outputs and launches on the current stream. Bad arguments raise ValueError naming the tensor and the problem
// (TORCH_CHECK_VALUE, translated below); a failing kernel or GEMM raises RuntimeError. These checks are the only
// ones on tensors: hot.backends.real calls check_* before the composed GEMMs (fp8_matmul, int_matmul), which take
// checked operands, and layer_gradients calls them itself.
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/extension.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "hot_kernels.h"

namespace {

// Integers enter TORCH_CHECK messages as strings: on the device build, an integer operand streamed by
// c10::str crashed the process (SIGSEGV) instead of raising; string and enum operands raised normally.
std::string num(int64_t v) { return std::to_string(v); }

std::string tuple_of(at::IntArrayRef v) {
  std::string s = "(";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + num(v[i]);
  return s + (v.size() == 1 ? ",)" : ")");
}

std::string shape_of(const at::Tensor& t) { return tuple_of(t.sizes()); }
std::string strides_of(const at::Tensor& t) { return tuple_of(t.strides()); }

// Zero codes appended along K add nothing to an integer product.
int64_t round_up(int64_t n, int64_t m) { return (n + m - 1) / m * m; }

void check_on_cuda(const at::Tensor& t, const char* name) {
  TORCH_CHECK_VALUE(t.is_cuda(), name, " must be a CUDA tensor, got device ", t.device());
}

void check_cuda(const at::Tensor& t, const char* name) {
  check_on_cuda(t, name);
  TORCH_CHECK_VALUE(t.is_contiguous(), name, " must be contiguous");
}

void check_dtype(const at::Tensor& t, at::ScalarType want, const char* name) {
  TORCH_CHECK_VALUE(t.scalar_type() == want, name, " must be ", want, ", got ", t.scalar_type());
}

void check_aligned(const at::Tensor& t, const char* name) {
  TORCH_CHECK_VALUE(reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 == 0, name, " must be 16-byte aligned (clone it)");
}

hot::InType float_type(const at::Tensor& t, const char* name) {
  switch (t.scalar_type()) {
    case at::kFloat: return hot::InType::F32;
    case at::kHalf: return hot::InType::F16;
    case at::kBFloat16: return hot::InType::BF16;
    default: TORCH_CHECK_VALUE(false, name, " must be float32, float16 or bfloat16, got ", t.scalar_type());
  }
}

void check_block(int64_t block, int64_t size, const char* what) {
  TORCH_CHECK_VALUE(block == 1 || block == 2 || block == 4 || block == 8 || block == 16,
              "Hadamard block must be 1, 2, 4, 8 or 16, got ", num(block));
  TORCH_CHECK_VALUE(size % block == 0, what, " = ", num(size), " is not a multiple of the Hadamard block ", num(block));
}

int qmax_of(int64_t bits) {
  TORCH_CHECK_VALUE(bits == 4 || bits == 8, "bits must be 4 or 8, got ", num(bits));
  return bits == 4 ? 7 : 127;
}

// qmax of codes written as the GEMM's operand: e4m3 holds every integer up to 16 exactly, so fp8 takes 4-bit codes.
int operand_qmax(int64_t bits, bool fp8) {
  TORCH_CHECK_VALUE(!fp8 || bits == 4, "fp8 operands hold 4-bit codes only (e4m3 is exact up to 16), got bits = ", num(bits));
  return qmax_of(bits);
}

// int32 scratch of n zeros (the amax reductions' atomics start from them): one memset, not a fill kernel.
at::Tensor zeroed_scratch(int64_t n, const at::TensorOptions& opts) {
  auto t = at::empty({n}, opts.dtype(at::kInt));
  C10_CUDA_CHECK(cudaMemsetAsync(t.data_ptr(), 0, n * sizeof(int32_t),
                                 c10::cuda::getCurrentCUDAStream(opts.device().index())));
  return t;
}

// A stochastic-rounding key argument: [key], or [seed, layer, stream, rank] for hot.rounding.hash_key of the step
// `step` holds (a 1-element int64 tensor on `device`, read by the kernels: hot.rounding.StepKey); hash_rounds: the
// finalisers a code's hash applies to its index (hot.rounding.hash_rounds).
hot::HashKey hash_key_arg(const std::vector<int64_t>& key, const std::optional<at::Tensor>& step,
                          const at::Device& device, const char* name, int64_t hash_rounds) {
  for (int64_t part : key) {
    TORCH_CHECK_VALUE(part >= 0 && part <= 0xFFFFFFFFLL, name, " holds ", num(part), ", not a 32-bit unsigned integer");
  }
  TORCH_CHECK_VALUE(hash_rounds == 1 || hash_rounds == 2, "hash_rounds must be 1 (\"fmix32\") or 2 (\"fmix32x2\"), got ",
                    num(hash_rounds));
  const auto rounds = static_cast<uint32_t>(hash_rounds);
  if (key.size() == 1) return hot::HashKey{nullptr, static_cast<uint32_t>(key[0]), 0u, 0u, 0u, 0u, rounds};
  TORCH_CHECK_VALUE(key.size() == 4, name, " must be [key] or [seed, layer, stream, rank], got ", num(key.size()),
                    " integers");
  TORCH_CHECK_VALUE(step.has_value(), name, " = [seed, layer, stream, rank] needs the step tensor");
  const at::Tensor& s = *step;
  TORCH_CHECK_VALUE(s.scalar_type() == at::kLong && s.numel() == 1, "step must be a 1-element int64 tensor, got ",
                    s.scalar_type(), " of ", num(s.numel()), " elements");
  TORCH_CHECK_VALUE(s.device() == device, "step is on ", s.device(), ", the quantised tensor on ", device);
  return hot::HashKey{s.data_ptr<int64_t>(), 0u, static_cast<uint32_t>(key[0]), static_cast<uint32_t>(key[1]),
                      static_cast<uint32_t>(key[2]), static_cast<uint32_t>(key[3]), rounds};
}

// (codes (L, O) int8, or float8 e4m3 with fp8; scale (L, 1) or ()).
std::vector<at::Tensor> hq_quantize_grad_output(const at::Tensor& g_y, int64_t block, int64_t bits, bool per_token,
                                                const std::vector<int64_t>& key, bool fp8,
                                                const std::optional<at::Tensor>& step, int64_t hash_rounds) {
  check_cuda(g_y, "g_y");
  check_aligned(g_y, "g_y");
  TORCH_CHECK_VALUE(g_y.dim() == 2, "g_y must be 2-D (L, O), got ", num(g_y.dim()), "-D");
  const auto type = float_type(g_y, "g_y");
  check_block(block, g_y.size(1), "O");
  const int qmax = operand_qmax(bits, fp8);
  TORCH_CHECK_VALUE(g_y.size(0) <= INT32_MAX, "g_y has too many rows for one launch");
  const hot::HashKey hash = hash_key_arg(key, step, g_y.device(), "key", hash_rounds);
  const c10::cuda::CUDAGuard guard(g_y.device());
  auto opts = g_y.options();
  auto codes = at::empty(g_y.sizes(), opts.dtype(fp8 ? at::kFloat8_e4m3fn : at::kChar));
  auto scale = per_token ? at::empty({g_y.size(0), 1}, opts.dtype(at::kFloat)) : at::empty({}, opts.dtype(at::kFloat));
  // Only a per-tensor scale reduces through the zeroed amax scratch (per token: no scratch, no memset launch).
  auto amax = per_token ? at::Tensor() : zeroed_scratch(1, opts);
  if (g_y.numel() > 0) {
    hot::hq_quantize_grad_output(g_y.data_ptr(), type, g_y.size(0), g_y.size(1), static_cast<int>(block), qmax,
                                 per_token, hash, fp8, static_cast<int8_t*>(codes.data_ptr()),
                                 scale.data_ptr<float>(),
                                 per_token ? nullptr : reinterpret_cast<uint32_t*>(amax.data_ptr<int32_t>()),
                                 c10::cuda::getCurrentCUDAStream());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  }
  return {codes, scale};
}

// W checked, its outputs and scratch made, as hot::hq_quantize_weight takes them.
struct WeightOutputs {
  hot::WeightQuantizeCall call;
  at::Tensor codes_t, scale, columns, partials;

  std::vector<at::Tensor> tensors(bool column_scales) const {
    return column_scales ? std::vector<at::Tensor>{codes_t, scale, columns} : std::vector<at::Tensor>{codes_t, scale};
  }
};

WeightOutputs weight_outputs(const at::Tensor& w, int64_t block, int64_t bits, bool fp8, bool column_scales) {
  check_cuda(w, "weight");
  TORCH_CHECK_VALUE(w.dim() == 2, "weight must be 2-D (O, I), got ", num(w.dim()), "-D");
  TORCH_CHECK_VALUE(w.numel() > 0, "weight is empty");
  const auto type = float_type(w, "weight");
  check_block(block, w.size(0), "O");
  const int qmax = operand_qmax(bits, fp8);
  auto opts = w.options();
  WeightOutputs out;
  out.codes_t = at::empty({w.size(1), w.size(0)}, opts.dtype(fp8 ? at::kFloat8_e4m3fn : at::kChar));
  out.scale = at::empty({}, opts.dtype(at::kFloat));
  out.columns = at::empty({column_scales ? w.size(1) : 0}, opts.dtype(at::kFloat));
  out.partials = at::empty({hot::sawb_partials_size()}, opts.dtype(at::kDouble));
  out.call = {w.data_ptr(), type, w.size(0), w.size(1), static_cast<int>(block), qmax, bits == 4, fp8,
              static_cast<int8_t*>(out.codes_t.data_ptr()), out.scale.data_ptr<float>(),
              column_scales ? out.columns.data_ptr<float>() : nullptr, out.partials.data_ptr<double>()};
  return out;
}

void run_weight(const hot::WeightQuantizeCall& c, cudaStream_t stream) {
  hot::hq_quantize_weight(c.w, c.type, c.out_rows, c.in_cols, c.block, c.qmax, c.sawb4, c.fp8, c.codes_t, c.scale,
                          c.column_scales, c.partials, stream);
}

// (codes_t (I, O) int8 = W's codes transposed, or float8 e4m3 with fp8; scale ()).
// Q(HT(W)): (codes_t (I, O), scale ()), and with column_scales the FP8 GEMM's column scale vector (I): scale / block.
std::vector<at::Tensor> quantize_weight(const at::Tensor& w, int64_t block, int64_t bits, bool fp8, bool column_scales) {
  check_cuda(w, "weight");  // before the guard, which takes CUDA devices only
  const c10::cuda::CUDAGuard guard(w.device());
  const WeightOutputs out = weight_outputs(w, block, bits, fp8, column_scales);
  run_weight(out.call, c10::cuda::getCurrentCUDAStream());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out.tensors(column_scales);
}

// quantize_weight's (codes_t, scale) and the statistics pass's partials it folded for the scale ((used, 3) float64
// triples: sum b², sum |b|, max |b|), for the tests that tie the scale's bits to the fold's host model.
std::vector<at::Tensor> quantize_weight_with_partials(const at::Tensor& w, int64_t block, int64_t bits) {
  check_cuda(w, "weight");
  const c10::cuda::CUDAGuard guard(w.device());
  const WeightOutputs out = weight_outputs(w, block, bits, false, false);
  run_weight(out.call, c10::cuda::getCurrentCUDAStream());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  const int used = hot::sawb_partials_used(w.size(0), w.size(1), static_cast<int>(block));
  return {out.codes_t, out.scale, out.partials.narrow(0, 0, 3 * used).view({used, 3})};
}

// quantize_weight's results, then hq_quantize_grad_output's for a per-token scale (w's bits and block), from two
// launches where W's code pass and g_y's rows share one (hot::hq_quantize_weight_and_grad_output), else from each
// quantiser's own: the same bits either way.
std::vector<at::Tensor> quantize_weight_and_grad_output(const at::Tensor& w, const at::Tensor& g_y, int64_t block,
                                                        int64_t bits, bool w_fp8, bool column_scales,
                                                        const std::vector<int64_t>& key, bool g_fp8,
                                                        const std::optional<at::Tensor>& step, int64_t hash_rounds) {
  check_cuda(g_y, "g_y");
  check_aligned(g_y, "g_y");
  TORCH_CHECK_VALUE(g_y.dim() == 2, "g_y must be 2-D (L, O), got ", num(g_y.dim()), "-D");
  TORCH_CHECK_VALUE(g_y.device() == w.device(), "g_y is on ", g_y.device(), ", weight on ", w.device());
  TORCH_CHECK_VALUE(g_y.size(1) == w.size(0), "g_y has ", num(g_y.size(1)), " columns, weight ", num(w.size(0)),
                    " rows (O)");
  const auto g_type = float_type(g_y, "g_y");
  const c10::cuda::CUDAGuard guard(w.device());
  const WeightOutputs out = weight_outputs(w, block, bits, w_fp8, column_scales);
  const int g_qmax = operand_qmax(bits, g_fp8);
  TORCH_CHECK_VALUE(g_y.size(0) <= INT32_MAX, "g_y has too many rows for one launch");
  const hot::HashKey hash = hash_key_arg(key, step, g_y.device(), "key", hash_rounds);
  auto opts = g_y.options();
  auto codes = at::empty(g_y.sizes(), opts.dtype(g_fp8 ? at::kFloat8_e4m3fn : at::kChar));
  auto scale = at::empty({g_y.size(0), 1}, opts.dtype(at::kFloat));
  const auto stream = c10::cuda::getCurrentCUDAStream();
  auto* g_codes = static_cast<int8_t*>(codes.data_ptr());
  if (g_y.numel() == 0 || g_qmax != out.call.qmax ||
      !hot::hq_quantize_weight_and_grad_output(out.call, g_y.data_ptr(), g_type, g_y.size(0), g_y.size(1), hash,
                                               g_fp8, g_codes, scale.data_ptr<float>(), stream)) {
    run_weight(out.call, stream);
    if (g_y.numel() > 0) {
      hot::hq_quantize_grad_output(g_y.data_ptr(), g_type, g_y.size(0), g_y.size(1), static_cast<int>(block), g_qmax,
                                   true, hash, g_fp8, g_codes, scale.data_ptr<float>(), nullptr, stream);
    }
  }
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  auto tensors = out.tensors(column_scales);
  tensors.push_back(codes);
  tensors.push_back(scale);
  return tensors;
}

// HLA windows (tokens, prefix, height, width, window_w) checked against L (x C channels): whole samples, a grid
// that accounts for T, 4x4 windows or 1x16 strips, and a sample's T x C elements below 2^31 (the kernels address
// a unit's rows at 32-bit offsets from its first).
hot::HlaWindows hla_windows(int64_t length, int64_t channels, const std::vector<int64_t>& w) {
  TORCH_CHECK_VALUE(w.size() == 5, "HLA windows are (tokens, prefix, height, width, window_w), got ", num(w.size()),
              " numbers");
  const hot::HlaWindows out{w[0], w[1], w[2], w[3], static_cast<int>(w[4])};
  TORCH_CHECK_VALUE(out.tokens >= 1 && length % out.tokens == 0, "L = ", num(length),
              " is not a whole number of samples of T = ", num(out.tokens), " positions");
  TORCH_CHECK_VALUE(out.prefix >= 0 && out.height >= 1 && out.width >= 1 && out.prefix + out.height * out.width == out.tokens,
              "HLA windows: ", num(out.prefix), " prefix + ", num(out.height), "x", num(out.width),
              " grid is not T = ", num(out.tokens));
  TORCH_CHECK_VALUE(out.window_w == 4 || (out.window_w == 16 && out.height == 1 && out.prefix == 0),
              "HLA windows must be 4x4, or 1x16 strips of a 1-row grid without prefix, got window width ",
              num(out.window_w));
  TORCH_CHECK_VALUE(out.tokens * channels <= INT32_MAX, "HLA: a sample of T = ", num(out.tokens), " positions x ",
              num(channels), " channels has more than 2^31 - 1 elements, the most the kernels index in 32 bits");
  TORCH_CHECK_VALUE(length <= INT32_MAX, "HLA: L = ", num(length),
              " rows is more than 2^31 - 1, the most the kernels number their units in 32 bits");
  return out;
}

// The kept HLA basis rows, checked: 1..16 distinct rows of 0..15.
std::vector<int> hla_kept_rows(const std::vector<int64_t>& rows) {
  const int rank = static_cast<int>(rows.size());
  TORCH_CHECK_VALUE(rank >= 1 && rank <= 16, "HLA rank must be in 1..16, got ", num(rank));
  std::vector<int> kept(rows.begin(), rows.end());
  unsigned seen = 0;
  for (int r : kept) {
    TORCH_CHECK_VALUE(r >= 0 && r < 16, "HLA basis row must be in 0..15, got ", num(r));
    TORCH_CHECK_VALUE(!(seen >> r & 1u), "HLA basis rows must be distinct, got row ", num(r), " twice");
    seen |= 1u << r;
  }
  return kept;
}

// An HLA call's windows and kept rows over L x C channels, checked, and the projection's row count: per sample,
// each window's rank rows and one row per prefix token.
struct HlaArgs {
  hot::HlaWindows windows;
  std::vector<int> kept;
  int64_t proj_rows;
  int rank() const { return static_cast<int>(kept.size()); }
};

HlaArgs hla_args(int64_t length, int64_t channels, const std::vector<int64_t>& windows,
                 const std::vector<int64_t>& rows) {
  const hot::HlaWindows w = hla_windows(length, channels, windows);
  std::vector<int> kept = hla_kept_rows(rows);
  const int64_t proj_rows = hot::hla_projected_rows(length, w, static_cast<int>(kept.size()));
  return {w, std::move(kept), proj_rows};
}

// t (L, C) checked as a non-empty 2-D float CUDA tensor, from its device, dtype and shape alone (not its layout in
// memory): its element type and the HLA arguments over it.
std::pair<hot::InType, HlaArgs> hla_shape(const at::Tensor& t, const std::vector<int64_t>& windows,
                                          const std::vector<int64_t>& rows) {
  check_on_cuda(t, "t");
  TORCH_CHECK_VALUE(t.dim() == 2, "t must be 2-D (L, C), got ", num(t.dim()), "-D");
  TORCH_CHECK_VALUE(t.numel() > 0, "t is empty");
  const auto type = float_type(t, "t");
  return {type, hla_args(t.size(0), t.size(1), windows, rows)};
}

// The tensor t (L, C) that hla_quantize and hla_project read: hla_shape's checks, and contiguous and 16-byte aligned.
std::pair<hot::InType, HlaArgs> hla_input(const at::Tensor& t, const std::vector<int64_t>& windows,
                                          const std::vector<int64_t>& rows) {
  check_cuda(t, "t");
  check_aligned(t, "t");
  return hla_shape(t, windows, rows);
}

// HLA codes_t (C, R) int8 as the kernels write them: a view of C rows hot::hla_codes_pitch(R) apart.
at::Tensor hla_codes(int64_t channels, int64_t proj_rows, const at::TensorOptions& opts) {
  return at::empty({channels, hot::hla_codes_pitch(proj_rows)}, opts.dtype(at::kChar)).narrow(1, 0, proj_rows);
}

// t checked, its outputs and scratch made, as hot::hla_quantize takes them.
struct HlaOutputs {
  hot::InType type;
  HlaArgs hla;
  int qmax;
  bool per_channel, stochastic;
  hot::HashKey hash;
  hot::HlaScratch scratch;
  at::Tensor t, codes_t, scale, amax, sums, partials;

  hot::ColumnSums column_sums() const {
    const bool asked = sums.numel() > 0;
    return {asked ? partials.data_ptr<float>() : nullptr, asked ? sums.data_ptr<float>() : nullptr};
  }
  uint32_t* amax_bits() const { return reinterpret_cast<uint32_t*>(amax.data_ptr<int32_t>()); }
  void run(cudaStream_t stream) const {
    hot::hla_quantize(t.data_ptr(), type, t.size(0), t.size(1), hla.windows, hla.kept.data(), hla.rank(), qmax,
                      per_channel, stochastic, hash, codes_t.data_ptr<int8_t>(), scale.data_ptr<float>(), scratch,
                      amax_bits(), column_sums(), stream);
  }
  hot::HlaQuantizeCall call() const {
    return {t.data_ptr(), type, t.size(0), t.size(1), hla.windows, hla.kept.data(), hla.rank(), qmax, stochastic,
            hash, codes_t.data_ptr<int8_t>(), scale.data_ptr<float>(), amax_bits(), column_sums()};
  }
};

HlaOutputs hla_outputs(const at::Tensor& t, const std::vector<int64_t>& windows, const std::vector<int64_t>& rows,
                       int64_t bits, bool stochastic, bool per_channel, const std::vector<int64_t>& key,
                       bool column_sums, const std::optional<at::Tensor>& step, int64_t hash_rounds) {
  auto [type, hla] = hla_input(t, windows, rows);
  HlaOutputs out{type, std::move(hla), qmax_of(bits), per_channel, stochastic,
                 hash_key_arg(key, step, t.device(), "key", hash_rounds)};
  const HlaArgs& h = out.hla;
  auto opts = t.options();
  out.t = t;
  out.codes_t = hla_codes(t.size(1), h.proj_rows, opts);
  out.scale = per_channel ? at::empty({t.size(1)}, opts.dtype(at::kFloat)) : at::empty({}, opts.dtype(at::kFloat));
  out.scratch = hot::hla_quantize_scratch(type, t.size(0), t.size(1), h.windows, h.rank(), per_channel, stochastic);
  out.amax = out.scratch.zeroed ? zeroed_scratch(out.scratch.words, opts)
                                : at::empty({out.scratch.words}, opts.dtype(at::kInt));
  out.sums = at::empty({column_sums ? t.size(1) : 0}, opts.dtype(at::kFloat));
  out.partials = at::empty({column_sums ? hot::hla_column_partial_rows(t.size(0), h.windows) : 0, t.size(1)},
                           opts.dtype(at::kFloat));
  return out;
}

// (codes_t (C, R) int8 = the projection's codes transposed, rows hot::hla_codes_pitch(R) apart, scale (C) or (),
// column sums: float32 (C), t summed over its L rows, with column_sums, else empty).
std::vector<at::Tensor> hla_quantize(const at::Tensor& t, const std::vector<int64_t>& windows,
                                     const std::vector<int64_t>& rows,
                                     int64_t bits, bool stochastic, bool per_channel,
                                     const std::vector<int64_t>& key, bool column_sums,
                                     const std::optional<at::Tensor>& step, int64_t hash_rounds) {
  check_cuda(t, "t");  // before the guard, which takes CUDA devices only
  const c10::cuda::CUDAGuard guard(t.device());
  const HlaOutputs out = hla_outputs(t, windows, rows, bits, stochastic, per_channel, key, column_sums, step,
                                     hash_rounds);
  out.run(c10::cuda::getCurrentCUDAStream());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return {out.codes_t, out.scale, out.sums};
}

// hla_quantize of a, then of b (per-tensor scales, one hash_rounds), both results in one list: from one cooperative
// launch where hot::hla_quantize_pair takes them, else from two calls on the current stream; the same bits.
std::vector<at::Tensor> hla_quantize_pair(const at::Tensor& a, const std::vector<int64_t>& windows_a,
                                          const std::vector<int64_t>& rows_a, int64_t bits_a, bool stochastic_a,
                                          const std::vector<int64_t>& key_a, bool column_sums_a,
                                          const std::optional<at::Tensor>& step_a, const at::Tensor& b,
                                          const std::vector<int64_t>& windows_b, const std::vector<int64_t>& rows_b,
                                          int64_t bits_b, bool stochastic_b, const std::vector<int64_t>& key_b,
                                          bool column_sums_b, const std::optional<at::Tensor>& step_b,
                                          int64_t hash_rounds) {
  check_cuda(a, "a");
  TORCH_CHECK_VALUE(b.device() == a.device(), "b is on ", b.device(), ", a on ", a.device());
  const c10::cuda::CUDAGuard guard(a.device());
  const HlaOutputs x = hla_outputs(a, windows_a, rows_a, bits_a, stochastic_a, false, key_a, column_sums_a, step_a,
                                   hash_rounds);
  const HlaOutputs y = hla_outputs(b, windows_b, rows_b, bits_b, stochastic_b, false, key_b, column_sums_b, step_b,
                                   hash_rounds);
  const auto stream = c10::cuda::getCurrentCUDAStream();
  // a zeroed scratch is the two-pass path's: such a tensor does not take the one launch alone either
  if (x.scratch.zeroed || y.scratch.zeroed || !hot::hla_quantize_pair(x.call(), y.call(), stream)) {
    x.run(stream);
    y.run(stream);
  }
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return {x.codes_t, x.scale, x.sums, y.codes_t, y.scale, y.sums};
}

// Whether hla_quantize_pair quantises a and b in one launch (hot::hla_pair_in_one_launch): a captured backward
// quantises them on two streams where it does not.
bool hla_pair_in_one_launch(const at::Tensor& a, const std::vector<int64_t>& windows_a,
                            const std::vector<int64_t>& rows_a, bool stochastic_a, const at::Tensor& b,
                            const std::vector<int64_t>& windows_b, const std::vector<int64_t>& rows_b,
                            bool stochastic_b) {
  check_on_cuda(a, "a");
  TORCH_CHECK_VALUE(b.device() == a.device(), "b is on ", b.device(), ", a on ", a.device());
  const c10::cuda::CUDAGuard guard(a.device());
  const auto [type_a, hla_a] = hla_shape(a, windows_a, rows_a);
  const auto [type_b, hla_b] = hla_shape(b, windows_b, rows_b);
  // what the question reads: type, shape, windows, rank and rounding (no data, outputs or key)
  const auto shape_of = [](const at::Tensor& t, hot::InType type, const HlaArgs& hla, bool stochastic) {
    return hot::HlaQuantizeCall{nullptr, type, t.size(0), t.size(1), hla.windows, hla.kept.data(), hla.rank(), 0,
                                stochastic, {}, nullptr, nullptr, nullptr, {}};
  };
  return hot::hla_pair_in_one_launch(shape_of(a, type_a, hla_a, stochastic_a),
                                     shape_of(b, type_b, hla_b, stochastic_b));
}

// LBP-WHT's float projection: P t (R, C) float32, rows as hla_quantize's.
at::Tensor hla_project(const at::Tensor& t, const std::vector<int64_t>& windows, const std::vector<int64_t>& rows) {
  const auto [type, hla] = hla_input(t, windows, rows);
  const c10::cuda::CUDAGuard guard(t.device());
  auto out = at::empty({hla.proj_rows, t.size(1)}, t.options().dtype(at::kFloat));
  hot::hla_project(t.data_ptr(), type, t.size(0), t.size(1), hla.windows, hla.kept.data(), hla.rank(),
                   out.data_ptr<float>(), c10::cuda::getCurrentCUDAStream());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}

// Its transpose: Pᵀ p / 16 at the windows' positions, prefix rows / 4: (length, C) float32 from p (R, C) float32.
at::Tensor hla_unproject(const at::Tensor& p, int64_t length, const std::vector<int64_t>& windows,
                         const std::vector<int64_t>& rows) {
  check_cuda(p, "p");
  check_aligned(p, "p");
  check_dtype(p, at::kFloat, "p");
  TORCH_CHECK_VALUE(p.dim() == 2, "p must be 2-D (R, C), got ", num(p.dim()), "-D");
  TORCH_CHECK_VALUE(length > 0 && p.size(1) > 0, "hla_unproject: length and p's channels must be positive, got ",
                    num(length), " and ", shape_of(p));
  const HlaArgs hla = hla_args(length, p.size(1), windows, rows);
  TORCH_CHECK_VALUE(p.size(0) == hla.proj_rows, "p must have ", num(hla.proj_rows), " rows (the projection of L = ",
                    num(length), " at rank ", num(hla.rank()), "), got ", shape_of(p));
  const c10::cuda::CUDAGuard guard(p.device());
  auto out = at::empty({length, p.size(1)}, p.options());
  hot::hla_unproject(p.data_ptr<float>(), length, p.size(1), hla.windows, hla.kept.data(), hla.rank(),
                     out.data_ptr<float>(), c10::cuda::getCurrentCUDAStream());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}

// Both quantisations of g_y from two passes: (hq codes (L, O) int8 or e4m3 with fp8, hq scale (L, 1) or (),
// hla codes_t (O, R) int8, hla scale (O) or (), column sums (O) float32 with column_sums, else empty).
std::vector<at::Tensor> quantize_grad_output(const at::Tensor& g_y, const std::vector<int64_t>& windows,
                                             int64_t block, int64_t hq_bits,
                                             bool per_token, const std::vector<int64_t>& hq_key, bool fp8,
                                             const std::vector<int64_t>& rows, int64_t hla_bits, bool per_channel,
                                             bool stochastic, const std::vector<int64_t>& hla_key,
                                             bool column_sums, const std::optional<at::Tensor>& step,
                                             int64_t hash_rounds) {
  check_cuda(g_y, "g_y");
  check_aligned(g_y, "g_y");
  TORCH_CHECK_VALUE(g_y.dim() == 2, "g_y must be 2-D (L, O), got ", num(g_y.dim()), "-D");
  TORCH_CHECK_VALUE(g_y.numel() > 0, "g_y is empty");
  const auto type = float_type(g_y, "g_y");
  const int64_t length = g_y.size(0), channels = g_y.size(1);
  check_block(block, channels, "O");
  TORCH_CHECK_VALUE(channels % 4 == 0, "the fused g_y quantiser needs O a multiple of 4, got ", num(channels));
  const HlaArgs hla = hla_args(length, channels, windows, rows);
  const c10::cuda::CUDAGuard guard(g_y.device());
  auto opts = g_y.options();
  auto f32 = opts.dtype(at::kFloat);
  auto hq_codes = at::empty({length, channels}, opts.dtype(fp8 ? at::kFloat8_e4m3fn : at::kChar));
  auto hq_scale = per_token ? at::empty({length, 1}, f32) : at::empty({}, f32);
  auto hla_codes_t = hla_codes(channels, hla.proj_rows, opts);
  auto hla_scale = per_channel ? at::empty({channels}, f32) : at::empty({}, f32);
  // One zeroed scratch for both amax arrays: a single memset.
  const int64_t hq_n = per_token ? length : 1, hla_n = per_channel ? channels : 1;
  auto amax = zeroed_scratch(hq_n + hla_n, opts);
  auto* amax_bits = reinterpret_cast<uint32_t*>(amax.data_ptr<int32_t>());
  hot::GradOutputQuant q{};
  q.length = length;
  q.channels = channels;
  q.windows = hla.windows;
  q.block = static_cast<int>(block);
  q.hq_qmax = operand_qmax(hq_bits, fp8);
  q.hq_per_token = per_token;
  q.fp8 = fp8;
  q.hq_key = hash_key_arg(hq_key, step, g_y.device(), "hq_key", hash_rounds);
  q.hq_codes = static_cast<int8_t*>(hq_codes.data_ptr());
  q.hq_scale = hq_scale.data_ptr<float>();
  q.hq_amax = amax_bits;
  q.rows = hla.kept.data();
  q.rank = hla.rank();
  q.hla_qmax = qmax_of(hla_bits);
  q.hla_per_channel = per_channel;
  q.hla_stochastic = stochastic;
  q.hla_key = hash_key_arg(hla_key, step, g_y.device(), "hla_key", hash_rounds);
  q.hla_codes_t = hla_codes_t.data_ptr<int8_t>();
  q.hla_scale = hla_scale.data_ptr<float>();
  q.hla_amax = amax_bits + hq_n;
  auto sums = at::empty({column_sums ? channels : 0}, f32);
  auto partials = at::empty({column_sums ? hot::hla_column_partial_rows(length, hla.windows) : 0, channels}, f32);
  q.sums = {column_sums ? partials.data_ptr<float>() : nullptr, column_sums ? sums.data_ptr<float>() : nullptr};
  hot::quantize_grad_output(g_y.data_ptr(), type, q, c10::cuda::getCurrentCUDAStream());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return {hq_codes, hq_scale, hla_codes_t, hla_scale, sums};
}

// float32 (M, N) = (acc * row) * (col / divisor); row has M or 1 elements, col N or 1.
at::Tensor dequantize(const at::Tensor& acc, const at::Tensor& row, const at::Tensor& col, double divisor) {
  check_cuda(acc, "acc");
  check_cuda(row, "row scale");
  check_cuda(col, "column scale");
  TORCH_CHECK_VALUE(acc.dim() == 2, "acc must be 2-D");
  check_dtype(row, at::kFloat, "row scale");
  check_dtype(col, at::kFloat, "column scale");
  const int64_t m = acc.size(0), n = acc.size(1);
  TORCH_CHECK_VALUE(row.numel() == m || row.numel() == 1, "row scale has ", num(row.numel()), " elements, want ", num(m),
              " or 1");
  TORCH_CHECK_VALUE(col.numel() == n || col.numel() == 1, "column scale has ", num(col.numel()), " elements, want ",
              num(n), " or 1");
  const c10::cuda::CUDAGuard guard(acc.device());
  auto out = at::empty({m, n}, acc.options().dtype(at::kFloat));
  if (out.numel() == 0) return out;
  const auto stream = c10::cuda::getCurrentCUDAStream();
  const bool row_vec = row.numel() == m && m != 1, col_vec = col.numel() == n && n != 1;
  if (acc.scalar_type() == at::kInt) {
    hot::dequantize_i32(acc.data_ptr<int32_t>(), m, n, row.data_ptr<float>(), row_vec, col.data_ptr<float>(), col_vec,
                        static_cast<float>(divisor), out.data_ptr<float>(), stream);
  } else {
    check_dtype(acc, at::kFloat, "acc");
    hot::dequantize_f32(acc.data_ptr<float>(), m, n, row.data_ptr<float>(), row_vec, col.data_ptr<float>(), col_vec,
                        static_cast<float>(divisor), out.data_ptr<float>(), stream);
  }
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}

at::Tensor codes_to_e4m3(const at::Tensor& codes, int64_t cols_pad) {
  check_cuda(codes, "codes");
  check_dtype(codes, at::kChar, "codes");
  TORCH_CHECK_VALUE(codes.dim() == 2, "codes must be 2-D");
  TORCH_CHECK_VALUE(cols_pad >= codes.size(1), "cols_pad must be at least the column count");
  const c10::cuda::CUDAGuard guard(codes.device());
  auto out = at::empty({codes.size(0), cols_pad}, codes.options().dtype(at::kFloat8_e4m3fn));
  if (out.numel() == 0) return out;
  hot::codes_to_e4m3(codes.data_ptr<int8_t>(), codes.size(0), codes.size(1), cols_pad,
                     reinterpret_cast<uint8_t*>(out.data_ptr()), c10::cuda::getCurrentCUDAStream());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}

at::Tensor pack_int4(const at::Tensor& codes, int64_t cols_pad) {
  check_cuda(codes, "codes");
  check_dtype(codes, at::kChar, "codes");
  TORCH_CHECK_VALUE(codes.dim() == 2, "codes must be 2-D");
  TORCH_CHECK_VALUE(cols_pad >= codes.size(1) && cols_pad % 2 == 0, "cols_pad must be even and at least the column count");
  const c10::cuda::CUDAGuard guard(codes.device());
  auto out = at::empty({codes.size(0), cols_pad / 2}, codes.options().dtype(at::kByte));
  if (out.numel() == 0) return out;
  hot::pack_int4(codes.data_ptr<int8_t>(), codes.size(0), codes.size(1), cols_pad, out.data_ptr<uint8_t>(),
                 c10::cuda::getCurrentCUDAStream());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}

void check_gemm_status(int status) {
  TORCH_CHECK(status == 0, "CUTLASS GEMM failed: ", hot::cutlass_status_string(status));
}

// int32 (M, N) = A (M, K) · Bᵀ with B stored (N, K): INT4 packed two per byte (K/2 bytes a row).
at::Tensor cutlass_gemm_s4(const at::Tensor& a, const at::Tensor& b) {
  check_cuda(a, "a");
  check_cuda(b, "b");
  check_dtype(a, at::kByte, "a (packed int4)");
  check_dtype(b, at::kByte, "b (packed int4)");
  check_aligned(a, "a");
  check_aligned(b, "b");
  TORCH_CHECK_VALUE(a.dim() == 2 && b.dim() == 2 && a.size(1) == b.size(1), "a (M, K/2) and b (N, K/2) must agree in K");
  const int64_t k = 2 * a.size(1);
  TORCH_CHECK_VALUE(k % 32 == 0, "INT4 GEMM needs K a multiple of 32, got ", num(k));
  TORCH_CHECK_VALUE(b.size(0) % 4 == 0, "INT4 GEMM needs N a multiple of 4, got ", num(b.size(0)));
  const c10::cuda::CUDAGuard guard(a.device());
  auto d = at::empty({a.size(0), b.size(0)}, a.options().dtype(at::kInt));
  check_gemm_status(hot::cutlass_gemm_s4(a.data_ptr<uint8_t>(), b.data_ptr<uint8_t>(), d.data_ptr<int32_t>(),
                                         static_cast<int>(a.size(0)), static_cast<int>(b.size(0)), static_cast<int>(k),
                                         c10::cuda::getCurrentCUDAStream()));
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return d;
}

// The operands of both INT8 GEMMs: 16-byte aligned int8 CUDA matrices A (M, K) and B (N, K), contiguous where
// `contiguous` (the sm90 GEMM checks their rows itself).
void check_int8_gemm_operands(const at::Tensor& a, const at::Tensor& b, bool contiguous = true) {
  const auto check_device = contiguous ? check_cuda : check_on_cuda;
  check_device(a, "a");
  check_device(b, "b");
  check_dtype(a, at::kChar, "a");
  check_dtype(b, at::kChar, "b");
  check_aligned(a, "a");
  check_aligned(b, "b");
  TORCH_CHECK_VALUE(a.dim() == 2 && b.dim() == 2 && a.size(1) == b.size(1), "a (M, K) and b (N, K) must agree in K");
}

// int32 (M, N) = A (M, K) · Bᵀ with B stored (N, K), int8.
at::Tensor cutlass_gemm_s8(const at::Tensor& a, const at::Tensor& b) {
  check_int8_gemm_operands(a, b);
  TORCH_CHECK_VALUE(a.size(1) % 16 == 0, "INT8 GEMM needs K a multiple of 16, got ", num(a.size(1)));
  TORCH_CHECK_VALUE(b.size(0) % 4 == 0, "INT8 GEMM needs N a multiple of 4, got ", num(b.size(0)));
  const c10::cuda::CUDAGuard guard(a.device());
  auto d = at::empty({a.size(0), b.size(0)}, a.options().dtype(at::kInt));
  check_gemm_status(hot::cutlass_gemm_s8(a.data_ptr<int8_t>(), b.data_ptr<int8_t>(), d.data_ptr<int32_t>(),
                                         static_cast<int>(a.size(0)), static_cast<int>(b.size(0)),
                                         static_cast<int>(a.size(1)), c10::cuda::getCurrentCUDAStream()));
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return d;
}

// The row pitch of a (rows, K) int8 matrix as TMA reads it (a one-row matrix's stride is not read: K rounded up to
// 16 stands for it).
int64_t row_pitch(const at::Tensor& t) { return t.size(0) <= 1 ? round_up(t.size(1), 16) : t.stride(0); }

// Whether the sm90 GEMM reads int8 t (rows, K) where it lies: contiguous rows from a 16-byte aligned start, their
// pitch a multiple of 16 bytes (K any: TMA fills the last K tile past K with zeros). An HLA quantiser's codes_t is
// so at every R (hot::hla_codes_pitch).
bool tma_rows(const at::Tensor& t) {
  return t.dim() == 2 && (t.stride(1) == 1 || t.size(1) <= 1) && row_pitch(t) % 16 == 0 &&
         row_pitch(t) >= t.size(1) && reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 == 0;
}

// The sm90 GEMM's operand checks: A (M, K), B (N, K) int8 on one device, each read where it lies (tma_rows), and
// N % 4 == 0 (TMA: 16-byte rows of the int32 or float D).
void check_sm90_operands(const at::Tensor& a, const at::Tensor& b) {
  check_int8_gemm_operands(a, b, false);
  TORCH_CHECK_VALUE(a.device() == b.device(), "a and b must be on the same device");
  const int64_t m = a.size(0), n = b.size(0), k = a.size(1);
  // an empty product launches nothing
  TORCH_CHECK_VALUE(a.numel() == 0 || b.numel() == 0 || (tma_rows(a) && tma_rows(b)),
                    "sm90 INT8 GEMM needs a and b in rows of contiguous bytes, 16-byte aligned, their pitch a "
                    "multiple of 16 (TMA), got strides ", strides_of(a), " and ", strides_of(b), " (K = ", num(k),
                    "; a contiguous K must be a multiple of 16)");
  TORCH_CHECK_VALUE(n % 4 == 0, "sm90 INT8 GEMM needs N a multiple of 4 (TMA: 16-byte output rows), got ", num(n));
  TORCH_CHECK_VALUE(m <= INT32_MAX && n <= INT32_MAX && k <= INT32_MAX, "sm90 INT8 GEMM: a dimension exceeds int32");
  const c10::cuda::CUDAGuard guard(a.device());  // the probe asks the current device: make it a's
  TORCH_CHECK(hot::cutlass_sm90_available(), hot::cutlass_sm90_status_string(hot::kSm90NotCompiled));
}

// The workspace the sm90 GEMM asks for (undefined where it needs none).
at::Tensor sm90_workspace(const at::Tensor& a, int m, int n, int k, int variant, int decomposition, int splits,
                          bool dequant) {
  const int64_t bytes = hot::cutlass_gemm_s8_sm90_workspace(m, n, k, variant, decomposition, splits, dequant);
  return bytes > 0 ? at::empty({bytes}, a.options().dtype(at::kByte)) : at::Tensor();
}

void check_sm90_status(int status) {
  // A configuration the dispatcher rejects is the caller's error (ValueError), not a failed GEMM.
  TORCH_CHECK_VALUE(status != hot::kSm90BadConfig, hot::cutlass_sm90_status_string(status));
  TORCH_CHECK(status == 0, "CUTLASS sm90 GEMM failed: ", hot::cutlass_sm90_status_string(status));
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// int32 (M, N) = A (M, K) · Bᵀ with B stored (N, K), int8, by the CUTLASS sm_90a (wgmma/TMA) GEMM.
// variant 0: cooperative 128x128x128, stream-K scheduler; 1: ping-pong 64x128x128. decomposition (variant 0):
// 0 heuristic, 1 data-parallel, 2 stream-K, 3 split-K into `splits`.
at::Tensor cutlass_gemm_s8_sm90(const at::Tensor& a, const at::Tensor& b, int64_t variant, int64_t decomposition,
                                int64_t splits) {
  check_sm90_operands(a, b);
  const c10::cuda::CUDAGuard guard(a.device());
  const int64_t m = a.size(0), n = b.size(0), k = a.size(1);
  if (m == 0 || n == 0) return at::empty({m, n}, a.options().dtype(at::kInt));
  if (k == 0) return at::zeros({m, n}, a.options().dtype(at::kInt));
  auto d = at::empty({m, n}, a.options().dtype(at::kInt));
  const int mi = static_cast<int>(m), ni = static_cast<int>(n), ki = static_cast<int>(k);
  const int var = static_cast<int>(variant), dec = static_cast<int>(decomposition), spl = static_cast<int>(splits);
  const at::Tensor ws = sm90_workspace(a, mi, ni, ki, var, dec, spl, false);
  check_sm90_status(hot::cutlass_gemm_s8_sm90(a.data_ptr<int8_t>(), row_pitch(a), b.data_ptr<int8_t>(), row_pitch(b),
                                              d.data_ptr<int32_t>(), mi, ni, ki, var, dec, spl,
                                              ws.defined() ? ws.data_ptr() : nullptr, ws.defined() ? ws.numel() : 0,
                                              c10::cuda::getCurrentCUDAStream()));
  return d;
}

bool is_power_of_two(double x) {
  int exponent = 0;
  return x > 0 && std::isfinite(x) && std::frexp(x, &exponent) == 0.5 && exponent > -125 && exponent < 127;
}

// A scale vector as the epilogue is given it: contiguous, and 16-byte aligned like a fresh allocation (a copy where
// not, a few hundred bytes).
at::Tensor epilogue_vector(const at::Tensor& v) {
  const at::Tensor c = v.reshape(-1).contiguous();
  return reinterpret_cast<uintptr_t>(c.data_ptr()) % 16 == 0 ? c : c.clone();
}

// A float32 CUDA scale with one element or `n` (one per row or column of the product).
void check_scale(const at::Tensor& t, const char* name, int64_t n) {
  TORCH_CHECK_VALUE(t.is_cuda() && t.scalar_type() == at::kFloat, name, " must be a float32 CUDA tensor, got ",
                    t.scalar_type(), " on ", t.device());
  TORCH_CHECK_VALUE(t.numel() == 1 || t.numel() == n, name, " has ", num(t.numel()), " elements, expected 1 or ",
                    num(n));
}

// check_scale, on the codes' device (any strides: epilogue_vector copies).
void check_epilogue_scale(const at::Tensor& scale, const char* name, int64_t want, const at::Tensor& codes) {
  TORCH_CHECK_VALUE(scale.device() == codes.device(), name, " is on ", scale.device(), ", the codes on ",
                    codes.device());
  check_scale(scale, name, want);
}

// float (M, N) = dequantize(cutlass_gemm_s8_sm90(a, b, ...), row, col, divisor) bit for bit, in one kernel: the
// scales are applied in the GEMM's epilogue. row: one number or M, col: one number or N (float32, a's device);
// divisor: a power of two (HOT's block), so that col / divisor is col times its exact inverse.
at::Tensor cutlass_gemm_s8_sm90_dequant(const at::Tensor& a, const at::Tensor& b, const at::Tensor& row,
                                        const at::Tensor& col, double divisor, int64_t variant, int64_t decomposition,
                                        int64_t splits) {
  check_sm90_operands(a, b);
  const int64_t m = a.size(0), n = b.size(0), k = a.size(1);
  check_epilogue_scale(row, "row scale", m, a);
  check_epilogue_scale(col, "column scale", n, a);
  // std::to_string, not the stream: formatting a double through an ostream here crashed on the H100 machine
  TORCH_CHECK_VALUE(is_power_of_two(divisor), "the dequantising sm90 GEMM needs a power-of-two divisor, got ",
                    std::to_string(divisor));
  const c10::cuda::CUDAGuard guard(a.device());
  if (m == 0 || n == 0) return at::empty({m, n}, a.options().dtype(at::kFloat));
  if (k == 0) {
    return dequantize(at::zeros({m, n}, a.options().dtype(at::kInt)), row.reshape(-1).contiguous(),
                      col.reshape(-1).contiguous(), divisor);
  }
  const at::Tensor r = epilogue_vector(row), c = epilogue_vector(col);
  hot::Sm90DequantScales scales;
  scales.row = r.data_ptr<float>();
  scales.row_vec = r.numel() == m && m != 1;
  scales.col = c.data_ptr<float>();
  scales.col_vec = c.numel() == n && n != 1;
  scales.inv_divisor = static_cast<float>(1.0 / divisor);
  auto d = at::empty({m, n}, a.options().dtype(at::kFloat));
  const int mi = static_cast<int>(m), ni = static_cast<int>(n), ki = static_cast<int>(k);
  const int var = static_cast<int>(variant), dec = static_cast<int>(decomposition), spl = static_cast<int>(splits);
  const at::Tensor ws = sm90_workspace(a, mi, ni, ki, var, dec, spl, true);
  check_sm90_status(hot::cutlass_gemm_s8_sm90_dequant(
      a.data_ptr<int8_t>(), row_pitch(a), b.data_ptr<int8_t>(), row_pitch(b), d.data_ptr<float>(), scales, mi, ni,
      ki, var, dec, spl, ws.defined() ? ws.data_ptr() : nullptr, ws.defined() ? ws.numel() : 0,
      c10::cuda::getCurrentCUDAStream()));
  return d;
}

// The CTAs cutlass_gemm_s8_sm90(a, b, variant) (or its dequantising kernel) launches, as CUTLASS's scheduler sizes
// the grid from the arguments run_gemm passes it, without launching it: for tests of the grid.
int64_t cutlass_gemm_s8_sm90_ctas(const at::Tensor& a, const at::Tensor& b, int64_t variant, bool dequant) {
  check_sm90_operands(a, b);
  TORCH_CHECK_VALUE(variant == 0 || variant == 1, "variant must be 0 or 1, got ", num(variant));
  const c10::cuda::CUDAGuard guard(a.device());
  const int64_t m = a.size(0), n = b.size(0), k = a.size(1);
  TORCH_CHECK_VALUE(m > 0 && n > 0 && k > 0, "the operands are empty: ", shape_of(a), " and ", shape_of(b));
  const auto d = at::empty({m, n}, a.options().dtype(dequant ? at::kFloat : at::kInt));
  return hot::cutlass_gemm_s8_sm90_ctas(a.data_ptr<int8_t>(), row_pitch(a), b.data_ptr<int8_t>(), row_pitch(b),
                                        d.data_ptr(), static_cast<int>(m), static_cast<int>(n), static_cast<int>(k),
                                        static_cast<int>(variant), dequant);
}

// Whether this build holds the sm_90a GEMM and the current device runs it.
bool cutlass_sm90_available() { return hot::cutlass_sm90_available(); }

// What the quantisers read: a float32/float16/bfloat16 2-D CUDA tensor (any strides: the caller makes it
// contiguous and aligned).
void check_float_matrix(const at::Tensor& t, const std::string& name) {
  TORCH_CHECK_VALUE(t.is_cuda(), name, " must be on a CUDA device for backend 'real', got ", t.device());
  float_type(t, name.c_str());
  TORCH_CHECK_VALUE(t.dim() == 2, name, " must be 2-D, got shape ", shape_of(t));
}

void check_codes(const at::Tensor& t, const char* name, bool fp8_ok) {
  TORCH_CHECK_VALUE(t.is_cuda(), name, " must be on a CUDA device, got ", t.device());
  TORCH_CHECK_VALUE(t.scalar_type() == at::kChar || (fp8_ok && t.scalar_type() == at::kFloat8_e4m3fn), name,
                    " must be int8 codes", fp8_ok ? " (or float8_e4m3fn)" : "", ", got ", t.scalar_type());
  TORCH_CHECK_VALUE(t.dim() == 2, name, " must be 2-D, got shape ", shape_of(t));
}

// g_x = a (L, O) · b (O, I), scales (L) or () and ().
void check_hq_matmul(const at::Tensor& a, const at::Tensor& a_scale, const at::Tensor& b, const at::Tensor& b_scale,
                     int64_t block) {
  check_codes(a, "a_codes", true);
  check_codes(b, "b_codes", true);
  TORCH_CHECK_VALUE(a.size(1) == b.size(0), "a_codes ", shape_of(a), " and b_codes ", shape_of(b),
                    " do not agree in O");
  TORCH_CHECK_VALUE(a.device() == b.device(), "a_codes on ", a.device(), " and b_codes on ", b.device());
  check_block(block, a.size(1), "O");
  check_scale(a_scale, "a_scale", a.size(0));
  check_scale(b_scale, "b_scale", 1);
}

// g_w = g (R, O)ᵀ · x (R, I), scales (O) or () and (I) or ().
void check_hla_matmul(const at::Tensor& g, const at::Tensor& g_scale, const at::Tensor& x, const at::Tensor& x_scale) {
  check_codes(g, "g_codes", false);
  check_codes(x, "x_codes", false);
  TORCH_CHECK_VALUE(g.size(0) == x.size(0), "g_codes ", shape_of(g), " and x_codes ", shape_of(x),
                    " do not agree in projected rows");
  TORCH_CHECK_VALUE(g.device() == x.device(), "g_codes on ", g.device(), " and x_codes on ", x.device());
  check_scale(g_scale, "g_scale", g.size(1));
  check_scale(x_scale, "x_scale", x.size(1));
}

// The step a HOT layer's forward uses, as a new 1-element tensor, and `step` moved on by one: one launch, so a
// captured CUDA graph advances the step on every replay.
at::Tensor advance_step(const at::Tensor& step) {
  check_cuda(step, "step");
  check_dtype(step, at::kLong, "step");
  TORCH_CHECK_VALUE(step.numel() == 1, "step must hold one element, got ", num(step.numel()));
  const c10::cuda::CUDAGuard guard(step.device());
  auto saved = at::empty_like(step);
  hot::advance_step(step.data_ptr<int64_t>(), saved.data_ptr<int64_t>(), c10::cuda::getCurrentCUDAStream());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return saved;
}

// hot.rounding.uniform's numbers for a tensor of numel elements (row-major indices), as float32 on the CUDA device
// device_index: one kernel instead of the reference's int64 passes.
at::Tensor hash_uniform(int64_t numel, const std::vector<int64_t>& key, int64_t device_index,
                        const std::optional<at::Tensor>& step, int64_t hash_rounds) {
  TORCH_CHECK_VALUE(numel >= 0, "numel must be non-negative, got ", num(numel));
  const at::Device device(at::kCUDA, static_cast<c10::DeviceIndex>(device_index));
  const hot::HashKey hash = hash_key_arg(key, step, device, "key", hash_rounds);
  TORCH_CHECK_VALUE(device_index >= 0 && device_index < c10::cuda::device_count(), "device index ", num(device_index),
                    " names no CUDA device (", num(c10::cuda::device_count()), " visible)");
  const c10::cuda::CUDAGuard guard(device);
  auto out = at::empty({numel}, at::TensorOptions().dtype(at::kFloat).device(device));
  if (numel == 0) return out;
  check_aligned(out, "hash_uniform's output");  // the kernel's 16-byte stores
  hot::hash_uniform(out.data_ptr<float>(), numel, hash, c10::cuda::getCurrentCUDAStream());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}

// --- Composed ops: a layer's GEMMs with their dequantisation, and its whole backward, in one call ------------------
// What hot.backends.real runs where a layer's backward goes op by op from Python, here once from C++: an eager HOT
// step is bound by its host time (about 25 torch and kernel calls a layer backward), and Python's share of that is
// the part these remove. The routes are hot.backends.real's names for the GEMMs it picked.

// Contiguous with a 16-byte aligned start (the kernels' vector loads, TMA).
at::Tensor aligned(const at::Tensor& t) {
  auto c = t.contiguous();
  return reinterpret_cast<uintptr_t>(c.data_ptr()) % 16 == 0 ? c : c.clone();
}

at::Tensor int8_of(const at::Tensor& codes) { return codes.scalar_type() == at::kChar ? codes : codes.to(at::kChar); }

bool contiguous_and_aligned(const at::Tensor& t) {
  return t.is_contiguous() && reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 == 0;
}

// A GEMM's int8 operands a (M, K) and b_t (N, K) with rows along K (transposed views copied so), then as they are
// where K is a multiple of `multiple` (8 or 16) and both are contiguous and aligned, else both with K zero-padded to
// a multiple of 16 in one launch (rows read where they lie, at any pitch): an HLA quantiser's codes at their row
// pitch take that one launch, not a copy each.
std::pair<at::Tensor, at::Tensor> pad_k(const at::Tensor& a, const at::Tensor& b_t, int64_t multiple) {
  TORCH_CHECK_VALUE(a.dim() == 2 && b_t.dim() == 2, "the integer GEMM's operands must be 2-D, got ", shape_of(a),
                    " and ", shape_of(b_t));
  TORCH_CHECK_VALUE(a.size(1) == b_t.size(1), "the integer GEMM's operands must agree in K, got ", shape_of(a),
                    " and ", shape_of(b_t));
  TORCH_CHECK_VALUE(a.is_cuda() && a.device() == b_t.device(), "the integer GEMM's operands must be on one CUDA "
                    "device, got ", a.device(), " and ", b_t.device());
  const int64_t k = a.size(1), k_pad = round_up(k, 16);
  const c10::cuda::CUDAGuard guard(a.device());
  const auto rows = [](const at::Tensor& t) { return t.stride(1) == 1 || t.size(1) <= 1 ? t : t.contiguous(); };
  const at::Tensor ac = rows(a), bc = rows(b_t);
  if (k % multiple == 0 && contiguous_and_aligned(ac) && contiguous_and_aligned(bc)) return {ac, bc};
  auto a_out = at::empty({a.size(0), k_pad}, ac.options());
  auto b_out = at::empty({b_t.size(0), k_pad}, bc.options());
  if (a_out.numel() + b_out.numel() > 0) {
    hot::pad_columns_i8(ac.data_ptr<int8_t>(), ac.size(0), ac.stride(0), a_out.data_ptr<int8_t>(),
                        bc.data_ptr<int8_t>(), bc.size(0), bc.stride(0), b_out.data_ptr<int8_t>(), k, k_pad,
                        c10::cuda::getCurrentCUDAStream());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  }
  return {a_out, b_out};
}

// The FP8 GEMM's operand, K zero-padded to k_pad: as it is where the quantiser wrote it so.
at::Tensor e4m3_operand(const at::Tensor& codes, int64_t k_pad) {
  if (codes.scalar_type() == at::kFloat8_e4m3fn && codes.size(1) == k_pad) return codes;
  return codes_to_e4m3(int8_of(codes), k_pad);
}

// g_x = (a · b_tᵀ) · row · (col / block) on FP8 tensor cores, rounded once to out_dtype: a (M, K) and b_t (N, K)
// 4-bit codes (e4m3, or int8 in -8..7), row M or 1 scales, col one. The scales fold the dequantisation into the
// GEMM's epilogue: the reference's (acc · row) · (col / block) up to fp32 rounding of the scale products (measured
// at most 1.9e-7 relative). Two per-tensor scales are the tensor-wise recipe, taken as they are; otherwise both are
// row-wise vectors (W's one scale repeated). block is a power of two: · (1 / block) is / block exactly.
// The GEMM itself, its scales as _scaled_mm takes them: both 0-D (tensor-wise) or (M, 1) and (1, N) (row-wise).
at::Tensor scaled_e4m3_matmul(const at::Tensor& a, const at::Tensor& scale_a, const at::Tensor& b_t,
                              const at::Tensor& scale_b, at::ScalarType out_dtype) {
  const int64_t k_pad = round_up(a.size(1), 16);
  return at::_scaled_mm(e4m3_operand(a, k_pad), e4m3_operand(b_t, k_pad).t(), scale_a, scale_b, std::nullopt,
                        std::nullopt, out_dtype, /*use_fast_accum=*/false);
}

// The g_x GEMM of HQ codes on the FP8 tensor cores with its scales as _scaled_mm takes them: tensor-wise where each
// side's scale is one number (row, and col_over_block: one number or n equal ones, as W's quantiser writes them),
// else a contiguous row vector (m, 1) and column vector (1, n). col_over_block: W's scale divided by the block.
at::Tensor scaled_codes_matmul(const at::Tensor& a, const at::Tensor& row, const at::Tensor& b_t,
                               const at::Tensor& col_over_block, bool tensor_wise, at::ScalarType out_dtype) {
  const int64_t m = a.size(0), n = b_t.size(0);
  if (tensor_wise) {
    return scaled_e4m3_matmul(a, row.reshape({}), b_t, col_over_block.reshape(-1).narrow(0, 0, 1).reshape({}),
                              out_dtype);
  }
  return scaled_e4m3_matmul(a, (row.numel() == m ? row : row.expand({m}).contiguous()).reshape({m, 1}), b_t,
                            col_over_block.expand({n}).contiguous().reshape({1, n}), out_dtype);
}

// W's scale (one number or n) over the block as n column scales (1 tensor-wise): the product col * (1 / block)
// that torch's multiply by a scalar makes, in one launch (a multiply and an expand's copy were two, on every g_x
// chain). Over a block of 1, n scales are their own quotients: no launch (W's quantiser writes them so).
at::Tensor columns_over_block(const at::Tensor& col, int64_t n, int64_t block) {
  const at::Tensor c = col.reshape(-1).contiguous();
  check_scale(c, "column scale", n);
  if (block == 1 && c.numel() == n) return c;
  const c10::cuda::CUDAGuard guard(c.device());
  auto out = at::empty({n}, c.options());
  if (n == 0) return out;
  hot::scale_columns(c.data_ptr<float>(), c.numel() == n && n != 1, static_cast<float>(1.0 / static_cast<double>(block)),
                     n, out.data_ptr<float>(), c10::cuda::getCurrentCUDAStream());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}

at::Tensor fp8_matmul(const at::Tensor& a, const at::Tensor& row, const at::Tensor& b_t, const at::Tensor& col,
                      int64_t block, at::ScalarType out_dtype) {
  const bool tensor_wise = row.numel() == 1 && col.numel() == 1;
  return scaled_codes_matmul(a, row, b_t, columns_over_block(col, tensor_wise ? 1 : b_t.size(0), block), tensor_wise,
                             out_dtype);
}

// The sm_90a GEMM's ping-pong kernel below this many multiply-adds, the cooperative one from it.
constexpr double kSm90PingpongMaxMacs = 1 << 30;

// The share of the SMs a small product's ping-pong grid (hot::sm90_pingpong_clusters) may take; above it the
// product takes the cooperative kernel, data-parallel (128 x 128 tiles: half the CTAs). 1 (the default): every
// small product takes the ping-pong kernel. In a captured backward the g_x and g_w GEMMs run at once on two
// streams, and a persistent grid that takes nearly every SM holds the other GEMM back. Process-wide, for A/Bs.
std::atomic<double> sm90_pingpong_sm_share{1.0};

void set_sm90_pingpong_sm_share(double share) {
  TORCH_CHECK_VALUE(share > 0 && share <= 1, "the ping-pong grid's SM share must be in (0, 1], got ",
                    std::to_string(share));
  sm90_pingpong_sm_share.store(share, std::memory_order_relaxed);
}

// The (variant, decomposition) of the sm_90a GEMM for an (m, n, k) product on the current device.
std::pair<int, int> sm90_kernel_for(int64_t m, int64_t n, int64_t k) {
  if (static_cast<double>(m) * n * k >= kSm90PingpongMaxMacs) return {0, hot::kSm90Heuristic};
  const double share = sm90_pingpong_sm_share.load(std::memory_order_relaxed);
  if (share >= 1) return {1, hot::kSm90Heuristic};
  int sms = 0;
  C10_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, c10::cuda::current_device()));
  const bool fits = 2.0 * hot::sm90_pingpong_clusters(m, n, sms) <= share * sms;
  return fits ? std::pair{1, hot::kSm90Heuristic} : std::pair{0, hot::kSm90DataParallel};
}

// float32 (M, N) = (a · b_tᵀ) dequantised as `dequantize` does: a (M, K), b_t (N, K) int8 codes (e4m3 ones are
// read as their int8 values) by the route's exact integer GEMM: "int4" CUTLASS sm80 on packed codes in -8..7,
// "int8" CUTLASS sm80, "int8_sm90" CUTLASS sm_90a, "int8_lt" cuBLASLt (torch._int_mm).
at::Tensor int_matmul(const at::Tensor& a, const at::Tensor& b_t, const at::Tensor& row, const at::Tensor& col,
                      double divisor, const std::string& route) {
  at::Tensor acc;
  if (route == "int4") {
    const int64_t k_pad = round_up(a.size(1), 32);  // the INT4 GEMM's alignment: 32 elements, 16 bytes
    acc = cutlass_gemm_s4(pack_int4(int8_of(a), k_pad), pack_int4(int8_of(b_t), k_pad));
  } else if (route == "int8") {
    const auto [a16, b16] = pad_k(int8_of(a), int8_of(b_t), 16);
    acc = cutlass_gemm_s8(a16, b16);
  } else if (route == "int8_sm90") {
    // read where they lie where TMA can (an HLA quantiser's codes at every R), else K padded
    const at::Tensor a8 = int8_of(a), b8 = int8_of(b_t);
    const auto [a16, b16] = tma_rows(a8) && tma_rows(b8) ? std::pair{a8, b8} : pad_k(a8, b8, 16);
    if (is_power_of_two(divisor)) {
      // Below about 1 G MACs (every g_w of the latency figure) the ping-pong 64 x 128 tiles take 6.7-9.3 µs on an
      // H100 against the cooperative kernel's 7.8-12.0; at training shapes the cooperative stream-K is faster
      // (26-60 against 29-81 µs). kernels/results/one_launch_h100_2026-11-27/sm90_gemm_bdb82c0.json.
      const c10::cuda::CUDAGuard guard(a16.device());
      const auto [variant, decomposition] = sm90_kernel_for(a16.size(0), b16.size(0), a16.size(1));
      return cutlass_gemm_s8_sm90_dequant(a16, b16, row, col, divisor, variant, decomposition, 1);
    }
    acc = cutlass_gemm_s8_sm90(a16, b16, 0, 0, 1);
  } else if (route == "int8_lt") {
    const auto [a8, b8] = pad_k(int8_of(a), int8_of(b_t), 8);
    acc = at::_int_mm(a8, b8.t());
  } else {
    TORCH_CHECK_VALUE(false, "unknown integer GEMM route '", route, "' (int4, int8, int8_sm90 or int8_lt)");
  }
  return dequantize(acc, row.reshape(-1).contiguous(), col.reshape(-1).contiguous(), divisor);
}

// One HOT layer's backward on the current stream, as hot.backends.real runs it op by op on one stream (the same
// kernels on the same inputs: the same bits): Q(HT(g_y)) and Q(P g_y) (with the bias gradient from the HLA
// statistics pass where column_sums), then Q(HT(W)) and g_x by gx_route ("fp8" or an int_matmul route) in
// gx_dtype, then g_w = (P g_y codes)ᵀ (P x codes) by gw_route in float32. x_codes (R, I), any strides (the HLA
// quantiser's are a transposed view), and x_scale are what the forward kept of x (ABC) or its codes made in the
// backward. Returns [g_x, g_w, column sums or
// an empty tensor].
std::vector<at::Tensor> layer_gradients(
    const at::Tensor& g_y, const at::Tensor& weight, const at::Tensor& x_codes, const at::Tensor& x_scale,
    int64_t block, int64_t gx_bits, bool per_token, const std::vector<int64_t>& hq_key, bool gy_fp8, bool w_fp8,
    const std::string& gx_route, at::ScalarType gx_dtype, const std::vector<int64_t>& windows,
    const std::vector<int64_t>& rows, int64_t gw_bits, bool stochastic, bool per_channel,
    const std::vector<int64_t>& hla_key, bool column_sums, const std::string& gw_route,
    const std::optional<at::Tensor>& step, int64_t hash_rounds) {
  check_float_matrix(g_y, "g_y");
  check_float_matrix(weight, "weight");
  check_codes(x_codes, "x_codes", false);  // before any launch; check_hla_matmul below checks R against g_y's codes
  check_scale(x_scale, "x_scale", x_codes.size(1));
  const c10::cuda::CUDAGuard guard(g_y.device());
  const at::Tensor g = aligned(g_y);
  const auto hq = hq_quantize_grad_output(g, block, gx_bits, per_token, hq_key, gy_fp8, step, hash_rounds);
  const auto hla =
      hla_quantize(g, windows, rows, gw_bits, stochastic, per_channel, hla_key, column_sums, step, hash_rounds);
  const bool fp8_route = gx_route == "fp8";
  // On the FP8 route W's quantiser also writes the GEMM's column scales (what fp8_matmul makes in a kernel of its own).
  const auto w = quantize_weight(aligned(weight), block, gx_bits, w_fp8, fp8_route);
  check_hq_matmul(hq[0], hq[1], w[0].t(), w[1], block);
  at::Tensor g_x;
  if (fp8_route) {  // W's scale is one number, so g_y's decides: fp8_matmul's choice
    g_x = scaled_codes_matmul(hq[0], hq[1], w[0], w[2], hq[1].numel() == 1, gx_dtype);
  } else {
    g_x = int_matmul(hq[0], w[0], hq[1], w[1], static_cast<double>(block), gx_route).to(gx_dtype);
  }
  check_hla_matmul(hla[0].t(), hla[1], x_codes, x_scale);
  const at::Tensor g_w = int_matmul(hla[0], x_codes.t(), hla[1], x_scale, hot::kHlaSlots, gw_route);
  return {g_x, g_w, hla[2]};
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "hot-kernels: HOT's fused Hadamard/HLA quantisers and integer GEMMs";
  // TORCH_CHECK_VALUE throws c10::ValueError: raised here as Python's ValueError, without the C++ backtrace.
  py::register_local_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const c10::ValueError& e) {
      PyErr_SetString(PyExc_ValueError, e.what_without_backtrace());
    }
  });
  m.def("hq_quantize_grad_output", &hq_quantize_grad_output);
  m.def("hq_quantize_weight", &quantize_weight, py::arg("w"), py::arg("block"), py::arg("bits"), py::arg("fp8"),
        py::arg("column_scales") = false);
  m.def("hq_quantize_weight_with_partials", &quantize_weight_with_partials);
  m.def("hq_quantize_weight_and_grad_output", &quantize_weight_and_grad_output);
  m.def("weight_and_grad_output_in_one_launch", &hot::weight_and_grad_output_in_one_launch);
  m.def("hla_quantize", &hla_quantize);
  m.def("hla_quantize_pair", &hla_quantize_pair);
  m.def("hla_codes_pitch", &hot::hla_codes_pitch);
  m.def("hla_pair_in_one_launch", &hla_pair_in_one_launch);
  m.def("set_hla_one_launch", &hot::set_hla_one_launch);
  m.def("set_hla_rolled_transform", &hot::set_hla_rolled_transform);
  m.def("hla_project", &hla_project);
  m.def("hla_unproject", &hla_unproject);
  m.def("quantize_grad_output", &quantize_grad_output);
  m.def("dequantize", &dequantize);
  m.def("hash_uniform", &hash_uniform);
  m.def("advance_step", &advance_step);
  m.def("codes_to_e4m3", &codes_to_e4m3);
  m.def("pack_int4", &pack_int4);
  m.def("cutlass_gemm_s4", &cutlass_gemm_s4);
  m.def("cutlass_gemm_s8", &cutlass_gemm_s8);
  m.def("cutlass_gemm_s8_sm90", &cutlass_gemm_s8_sm90, py::arg("a"), py::arg("b"), py::arg("variant") = 0,
        py::arg("decomposition") = 0, py::arg("splits") = 1);
  m.def("cutlass_gemm_s8_sm90_dequant", &cutlass_gemm_s8_sm90_dequant, py::arg("a"), py::arg("b"), py::arg("row"),
        py::arg("col"), py::arg("divisor"), py::arg("variant") = 0, py::arg("decomposition") = 0,
        py::arg("splits") = 1);
  m.def("cutlass_sm90_available", &cutlass_sm90_available);
  m.def("sm90_pingpong_clusters", &hot::sm90_pingpong_clusters, py::arg("m"), py::arg("n"), py::arg("sm_count"));
  m.def("set_sm90_balanced_grid", &hot::set_sm90_balanced_grid);
  m.def("set_sm90_programmatic_launch", &hot::set_sm90_programmatic_launch);
  m.def("set_sm90_pingpong_sm_share", &set_sm90_pingpong_sm_share);
  m.def("cutlass_gemm_s8_sm90_ctas", &cutlass_gemm_s8_sm90_ctas, py::arg("a"), py::arg("b"), py::arg("variant"),
        py::arg("dequant") = false);
  m.def("check_float_matrix", &check_float_matrix);
  m.def("check_hq_matmul", &check_hq_matmul);
  m.def("check_hla_matmul", &check_hla_matmul);
  m.def("fp8_matmul", &fp8_matmul);
  m.def("int_matmul", &int_matmul);
  m.def("layer_gradients", &layer_gradients, py::arg("g_y"), py::arg("weight"), py::arg("x_codes"),
        py::arg("x_scale"), py::arg("block"), py::arg("gx_bits"), py::arg("per_token"), py::arg("hq_key"),
        py::arg("gy_fp8"), py::arg("w_fp8"), py::arg("gx_route"), py::arg("gx_dtype"), py::arg("windows"),
        py::arg("rows"), py::arg("gw_bits"), py::arg("stochastic"), py::arg("per_channel"), py::arg("hla_key"),
        py::arg("column_sums"), py::arg("gw_route"), py::arg("step"), py::arg("hash_rounds"));
}
