// Plain C++ launchers of the hot-kernels CUDA code. No torch headers here, so the .cu files compile
// quickly with nvcc alone (the CPU build test relies on that); bindings.cpp adapts torch tensors.
#pragma once

#include <cstdint>
#include <cuda_runtime.h>

namespace hot {

enum class InType : int { F32 = 0, F16 = 1, BF16 = 2 };

// A stochastic-rounding key (hot.rounding): `key` as given where step is null, else
// hash_key(seed, layer, *step, stream, rank) with the step read on the device by every kernel that rounds, so a
// captured CUDA graph's replays each use the step the graph itself advanced. rounds: the finalisers a code's hash
// applies to its index (hot.rounding.hash_rounds: 2 for "fmix32x2", 1 for "fmix32").
struct HashKey {
  const int64_t* step;
  uint32_t key, seed, layer, stream, rank, rounds;
};

// Q(HT(g_y)): block Hadamard (n = block) along the rows of g_y (L x O), stochastic rounding by the
// counter hash. per_token: one scale per row; else one scale for the tensor (scale[0]).
// amax_bits: one zeroed uint32 of scratch (per-tensor only; unused, may be null, per token). codes: int8 (L x O),
// row-major; with fp8 the same values as float8 e4m3 bytes (the FP8 GEMM's operand).
void hq_quantize_grad_output(const void* g_y, InType type, int64_t rows, int64_t cols, int block, int qmax,
                             bool per_token, HashKey key, bool fp8, int8_t* codes, float* scale, uint32_t* amax_bits,
                             cudaStream_t stream);

// Q(HT(W)) for W (O x I): block Hadamard along O, SAWB per-tensor scale, round-to-nearest-even.
// codes_t: int8 (I x O) row-major, i.e. W's codes transposed (column-major B of the g_x GEMM), or
// e4m3 bytes with fp8. partials: scratch of sawb_partials_size() doubles. column_scales, where not null: I
// floats, each scale / block (exact: block is a power of two), the FP8 g_x GEMM's column scale vector, written by
// the quantiser so that no elementwise kernel makes it.
int sawb_partials_size();
// The triples (one a CTA of the statistics pass) that hq_quantize_weight writes to partials and folds for W's scale.
int sawb_partials_used(int64_t out_rows, int64_t in_cols, int block);
void hq_quantize_weight(const void* w, InType type, int64_t out_rows, int64_t in_cols, int block, int qmax,
                        bool sawb4, bool fp8, int8_t* codes_t, float* scale, float* column_scales, double* partials,
                        cudaStream_t stream);

// hq_quantize_weight's arguments.
struct WeightQuantizeCall {
  const void* w;
  InType type;
  int64_t out_rows, in_cols;
  int block, qmax;
  bool sawb4, fp8;
  int8_t* codes_t;
  float* scale;
  float* column_scales;
  double* partials;
};
// hq_quantize_weight (w) and the per-token hq_quantize_grad_output of g_y (L x O, w's qmax and block) in two
// launches, W's statistics pass and then one making both code sets: the same bits as the two calls. false, with
// nothing launched, where the one launch does not apply (a block other than 16, rows of more than 1024 chunks of
// 16: weight_and_grad_output_in_one_launch says where it does); the caller then makes the two calls.
bool weight_and_grad_output_in_one_launch(int block, int64_t cols);
bool hq_quantize_weight_and_grad_output(const WeightQuantizeCall& w, const void* g_y, InType g_type, int64_t rows,
                                        int64_t cols, HashKey key, bool g_fp8, int8_t* g_codes, float* g_scale,
                                        cudaStream_t stream);

// HLA's block: the kernels project 16 slots (tokens) at a time.
constexpr int kHlaSlots = 16;

// Where HLA's 16-slot blocks read a sample of `tokens` rows (hot.hla.HLAWindows): `prefix` rows, each its own
// projected row times 4, then a height x width raster grid cut into (16 / window_w) x window_w windows
// (window_w 4 or 16), zero-padded. prefix + height * width == tokens.
struct HlaWindows {
  int64_t tokens, prefix, height, width;
  int window_w;
};

// Rows of hla_quantize's projection of `length` rows at rank `rank`: samples * (windows * rank + prefix).
int64_t hla_projected_rows(int64_t length, const HlaWindows& windows, int rank);

// Where hla_quantize also writes t's column sums (sum over its L rows, float32; the bias gradient where t is g_y):
// partials, hla_column_partial_rows(L, windows) x C float32 scratch, and out (C). Both null: no sums.
struct ColumnSums {
  float* partials;
  float* out;
};
int64_t hla_column_partial_rows(int64_t length, const HlaWindows& windows);

// The row pitch of HLA codes_t (C x R): R rounded up to 16 bytes, so that the sm_90a GEMM's TMA reads the codes
// where the quantiser wrote them (its loads fill the last K tile past R with zeros), with no padding launch.
inline int64_t hla_codes_pitch(int64_t proj_rows) { return (proj_rows + 15) / 16 * 16; }

// Q(P t) along the token axis: t (L x C) in samples of windows.tokens rows, kept rows `rows[0..rank)` of H_16.
// codes_t: int8 (C x R) rows hla_codes_pitch(R) apart, R = samples*windows*rank window rows, then samples*prefix
// prefix rows (the bytes past R in each row are not written).
// per_channel: scale (C), else scale[0]. stochastic needs key. amax_bits: the scratch hla_quantize_scratch asks
// for. Needs windows.tokens * channels < 2^31 (a unit's rows at 32-bit offsets; the bindings check it), here and in
// quantize_grad_output.
// A tensor whose tiles all fit on the GPU at once takes one cooperative launch (a grid-wide barrier between the
// amax and the codes), else an amax pass and a code pass; the codes are the same bits.
struct HlaScratch {
  int64_t words;  // uint32 words of amax_bits
  bool zeroed;    // the two-pass path's amax accumulators (C or 1), zeroed; else one word a CTA, not
};
HlaScratch hla_quantize_scratch(InType type, int64_t length, int64_t channels, const HlaWindows& windows, int rank,
                                bool per_channel, bool stochastic);
void hla_quantize(const void* t, InType type, int64_t length, int64_t channels, const HlaWindows& windows,
                  const int* rows, int rank, int qmax, bool per_channel, bool stochastic, HashKey key, int8_t* codes_t,
                  float* scale, const HlaScratch& scratch, uint32_t* amax_bits, const ColumnSums& sums,
                  cudaStream_t stream);
// hla_quantize's arguments, for a per-tensor scale.
struct HlaQuantizeCall {
  const void* t;
  InType type;
  int64_t length, channels;
  HlaWindows windows;
  const int* rows;
  int rank, qmax;
  bool stochastic;
  HashKey key;
  int8_t* codes_t;
  float* scale;
  uint32_t* amax_bits;  // hla_quantize_scratch's, of a tensor that takes the one-launch path
  ColumnSums sums;
};
// Two per-tensor hla_quantize calls in one cooperative launch (the same bits), where both tensors have the same type
// and channels in fours, the one-launch path is on and all their tiles fit on the GPU at once. false, with nothing
// launched, elsewhere: the caller then makes the two calls.
bool hla_quantize_pair(const HlaQuantizeCall& a, const HlaQuantizeCall& b, cudaStream_t stream);
// Whether hla_quantize_pair takes a and b in one launch, on the current device (it reads only their types, shapes,
// windows, ranks and roundings): what it checks before it launches.
bool hla_pair_in_one_launch(const HlaQuantizeCall& a, const HlaQuantizeCall& b);
// Whether hla_quantize may take its one-launch path where it fits (default on): off, every call takes the two
// passes, for A/B tests and timings in one process.
void set_hla_one_launch(bool enabled);
// The one-launch HLA quantisers' phase 1 as a loop over a unit's channels (enabled, the default) or unrolled:
// process-wide, for A/B timings (the same bits either way).
void set_hla_rolled_transform(bool enabled);

// LBP-WHT's projection in floating point: P t (float32 R x C, row-major, rows as hla_quantize's codes_t columns),
// and its transpose Pᵀ p / 16 back at the windows' positions with prefix rows / 4 (float32 L x C, p: R x C).
void hla_project(const void* t, InType type, int64_t length, int64_t channels, const HlaWindows& windows,
                 const int* rows, int rank, float* out, cudaStream_t stream);
void hla_unproject(const float* p, int64_t length, int64_t channels, const HlaWindows& windows, const int* rows,
                   int rank, float* out, cudaStream_t stream);

// Both quantisations of g_y (L x O) at once, from two passes over it: Q(HT(g_y)) as hq_quantize_grad_output
// (codes L x O, scale L or 1) and Q(P g_y) as hla_quantize (codes_t O x R at its pitch, scale O or 1). Needs O % 4 == 0
// and 4-byte aligned rows. hq_amax (L or 1) and hla_amax (O or 1) are zeroed uint32 scratch.
struct GradOutputQuant {
  int64_t length, channels;
  HlaWindows windows;
  int block, hq_qmax;
  bool hq_per_token, fp8;
  HashKey hq_key;
  int8_t* hq_codes;
  float* hq_scale;
  uint32_t* hq_amax;
  const int* rows;  // host array of the rank kept basis rows
  int rank, hla_qmax;
  bool hla_per_channel, hla_stochastic;
  HashKey hla_key;
  int8_t* hla_codes_t;
  float* hla_scale;
  uint32_t* hla_amax;
  ColumnSums sums;  // g_y's column sums from pass 1, where asked for
};
void quantize_grad_output(const void* g_y, InType type, const GradOutputQuant& q, cudaStream_t stream);

// out[m, n] = (acc[m, n] * row[m or 0]) * (col[n or 0] / divisor), float32 IEEE ops in that order.
void dequantize_i32(const int32_t* acc, int64_t m, int64_t n, const float* row, bool row_vec, const float* col,
                    bool col_vec, float divisor, float* out, cudaStream_t stream);
void dequantize_f32(const float* acc, int64_t m, int64_t n, const float* row, bool row_vec, const float* col,
                    bool col_vec, float divisor, float* out, cudaStream_t stream);

// hot.rounding.uniform: out[e] = the hash's uniform in [0, 1) for row-major index e (mod 2^32) under key, n floats.
void hash_uniform(float* out, int64_t n, HashKey key, cudaStream_t stream);

// saved[0] = step[0]; step[0] += 1 (one thread): a HOT layer's forward takes its hash step and moves it on.
void advance_step(int64_t* step, int64_t* saved, cudaStream_t stream);

// out (n floats) = col (n floats, or one where !col_vec) * factor, each product rounded once.
void scale_columns(const float* col, bool col_vec, float factor, int64_t n, float* out, cudaStream_t stream);
// a (a_rows x cols, rows a_pitch apart) and b (b_rows x cols, rows b_pitch apart), int8, into a_out and b_out
// (16-byte aligned, rows x cols_pad, cols_pad a multiple of 16), zeros after cols: one launch.
void pad_columns_i8(const int8_t* a, int64_t a_rows, int64_t a_pitch, int8_t* a_out, const int8_t* b, int64_t b_rows,
                    int64_t b_pitch, int8_t* b_out, int64_t cols, int64_t cols_pad, cudaStream_t stream);
// int8 codes (rows x cols) -> float8 e4m3 bytes (rows x cols_pad), zero padded; exact for |v| <= 16.
void codes_to_e4m3(const int8_t* in, int64_t rows, int64_t cols, int64_t cols_pad, uint8_t* out,
                   cudaStream_t stream);

// int8 codes in -8..7 (rows x cols) -> packed int4 (rows x cols_pad/2 bytes), element 2k in the low nibble.
void pack_int4(const int8_t* in, int64_t rows, int64_t cols, int64_t cols_pad, uint8_t* out, cudaStream_t stream);

// CUTLASS sm80 tensor-op GEMMs, D (M x N, int32 row-major) = A (M x K row-major) * B (K x N column-major,
// stored N x K row-major). int4: packed, K a multiple of 32; int8: K a multiple of 16. Returns a
// cutlass::Status as int (0 = success); the kernels exist only when compiled for sm_80 or newer.
int cutlass_gemm_s4(const uint8_t* a, const uint8_t* b, int32_t* d, int m, int n, int k, cudaStream_t stream);
int cutlass_gemm_s8(const int8_t* a, const int8_t* b, int32_t* d, int m, int n, int k, cudaStream_t stream);
const char* cutlass_status_string(int status);

// CUTLASS 3.x sm_90a (Hopper wgmma/TMA, warp-specialised) INT8 GEMM, same TN contract as cutlass_gemm_s8:
// D (M x N, int32 row-major) = A (M x K, rows lda apart) * B (stored N x K, rows ldb apart). TMA needs 16-byte
// aligned base pointers and row pitches: lda and ldb multiples of 16 (at least K), N % 4 == 0. K itself is any:
// TMA fills the last K tile past K with zeros (CUTLASS's own check asks K % 16, so it is asked of K rounded up).
// variant 0: cooperative 128x128x128 on the stream-K
// scheduler, decomposition kSm90Heuristic/DataParallel/StreamK/SplitK (splits >= 2); variant 1: ping-pong
// 64x128x128, data-parallel only (decomposition 0 or 1). workspace: cutlass_gemm_s8_sm90_workspace() bytes
// (zero for data-parallel), on the device, for the same (m, n, k, variant, decomposition, splits) and device.
// Returns a cutlass::Status as int (0 = success) or one of the kSm90* codes below.
// cutlass_sm90_available(): this build holds the sm_90a code and the current device runs it.
constexpr int kSm90Heuristic = 0, kSm90DataParallel = 1, kSm90StreamK = 2, kSm90SplitK = 3;
constexpr int kSm90NotCompiled = 1000, kSm90BadConfig = 1001, kSm90WorkspaceTooSmall = 1002;
bool cutlass_sm90_available();
int64_t cutlass_gemm_s8_sm90_workspace(int m, int n, int k, int variant, int decomposition, int splits,
                                       bool dequant = false);
int cutlass_gemm_s8_sm90(const int8_t* a, int64_t lda, const int8_t* b, int64_t ldb, int32_t* d, int m, int n, int k,
                         int variant, int decomposition, int splits, void* workspace, int64_t workspace_bytes,
                         cudaStream_t stream);
// The same GEMM with dequantize_i32's arithmetic in its epilogue: float D = (float(acc) * row) * (col *
// inv_divisor), row one number or M (row_vec), col one number or N (col_vec), both float on the device
// (contiguous where vectors). Equal to dequantize_i32 of the int32 GEMM bit for bit where inv_divisor is the
// exact inverse of a power-of-two divisor. Workspace: cutlass_gemm_s8_sm90_workspace(..., dequant = true).
struct Sm90DequantScales {
  const float* row = nullptr;
  bool row_vec = false;
  const float* col = nullptr;
  bool col_vec = false;
  float inv_divisor = 1.0f;
};
int cutlass_gemm_s8_sm90_dequant(const int8_t* a, int64_t lda, const int8_t* b, int64_t ldb, float* d,
                                 const Sm90DequantScales& scales, int m, int n, int k, int variant, int decomposition,
                                 int splits, void* workspace, int64_t workspace_bytes, cudaStream_t stream);
const char* cutlass_sm90_status_string(int status);
// The ping-pong kernel's persistent grid, in 2-CTA clusters, on a GPU of sm_count SMs: the fewest clusters that
// finish its ceil(M / 128) x ceil(N / 128) cluster tiles in as many waves as a full grid (sm_count / 2 clusters)
// would.
// The full grid takes every SM even where its last wave is nearly empty (144 tiles on 66 clusters: 3 waves), and
// a persistent CTA holds its SM for the whole kernel, so the other stream's kernels (a backward's g_x GEMM beside
// this g_w GEMM) wait for SMs that add nothing here (48 clusters take the same 3 waves).
int sm90_pingpong_clusters(int64_t m, int64_t n, int sm_count);
// Whether the ping-pong kernel launches sm90_pingpong_clusters' grid (true, the default) or CUTLASS's full one:
// process-wide, for A/B timings in one process.
void set_sm90_balanced_grid(bool enabled);
// Whether the sm90 GEMMs launch as programmatic dependents of the kernel before them on the stream (true, the
// default): their launch overlaps that kernel's completion, and they wait (griddepcontrol.wait) before anything
// else. Graph capture records such launches as programmatic edges from CUDA 12.3 (measured with CUDA 13.0).
// Process-wide, for A/B timings in one process.
void set_sm90_programmatic_launch(bool enabled);
// The CTAs the sm90 GEMM (variant 0 or 1, decomposition 0, one split; dequant: the dequantising epilogue's kernel)
// would launch for these operands (as cutlass_gemm_s8_sm90 takes them; d: the int32 or float output) on the current
// device, as CUTLASS's scheduler sizes its grid, without launching it; 0 where not compiled.
int64_t cutlass_gemm_s8_sm90_ctas(const int8_t* a, int64_t lda, const int8_t* b, int64_t ldb, void* d, int m, int n,
                                  int k, int variant, bool dequant);

}  // namespace hot
