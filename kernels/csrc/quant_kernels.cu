// Transform + quantise kernels of HOT. Every float operation is an explicit IEEE round-to-nearest
// intrinsic in the same order as the PyTorch reference (src/hot/), so the codes are bit-identical.
#include "hot_kernels.h"
#include "hla_windows.cuh"
#include "quant_scalar.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cooperative_groups.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <numeric>
#include <tuple>
#include <type_traits>

namespace hot {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxGrid = 4096;

// f(std::integral_constant<int, N>) for the Hadamard block N in 1, 2, 4, 8, 16 (validated by the callers):
// the kernels take N as a template parameter so every butterfly index is a constant.
template <typename F>
void with_hadamard_block(int block, F&& f) {
  switch (block) {
    case 1: return f(std::integral_constant<int, 1>{});
    case 2: return f(std::integral_constant<int, 2>{});
    case 4: return f(std::integral_constant<int, 4>{});
    case 8: return f(std::integral_constant<int, 8>{});
    default: return f(std::integral_constant<int, 16>{});
  }
}

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }

template <int Bytes> struct VecOf;
template <> struct VecOf<16> { using type = uint4; };
template <> struct VecOf<8> { using type = uint2; };
template <> struct VecOf<4> { using type = uint32_t; };
template <> struct VecOf<2> { using type = uint16_t; };
template <> struct VecOf<1> { using type = uint8_t; };

// N contiguous elements at p (aligned to N*sizeof(T) up to 16 bytes), widened to float, where `load` holds, else N
// zeros (+0.0f): a predicated load into zeroed registers.
template <typename T, int N>
__device__ __forceinline__ void load_contiguous_if(bool load, const T* p, float (&v)[N]) {
  constexpr int kBytes = N * static_cast<int>(sizeof(T));
  constexpr int kWidth = kBytes >= 16 ? 16 : kBytes;
  using V = typename VecOf<kWidth>::type;
  V raw[kBytes / kWidth];
#pragma unroll
  for (int i = 0; i < kBytes / kWidth; ++i) {
    raw[i] = V{};
    if (load) raw[i] = __ldg(reinterpret_cast<const V*>(p) + i);
  }
  const T* e = reinterpret_cast<const T*>(raw);
#pragma unroll
  for (int k = 0; k < N; ++k) v[k] = to_float(e[k]);
}

template <typename T, int N>
__device__ __forceinline__ void load_contiguous(const T* p, float (&v)[N]) {
  load_contiguous_if<T, N>(true, p, v);
}

// N int8 codes to p, aligned to min(N, 16) bytes.
template <int N>
__device__ __forceinline__ void store_codes(int8_t* p, const int8_t (&q)[N]) {
  constexpr int kWidth = N >= 16 ? 16 : N;
  using V = typename VecOf<kWidth>::type;
#pragma unroll
  for (int i = 0; i < N / kWidth; ++i) reinterpret_cast<V*>(p)[i] = reinterpret_cast<const V*>(q)[i];
}

// hot.hadamard.block_hadamard on one block: stages h = 1, 2, 4, ..., pairs (a + b, a - b). The stage is a
// template parameter so every index is a constant (a run-time h loop left v in local memory).
template <int N, int H = 1>
__device__ __forceinline__ void butterfly(float (&v)[N]) {
  if constexpr (H < N) {
#pragma unroll
    for (int i = 0; i < N; i += 2 * H) {
#pragma unroll
      for (int j = i; j < i + H; ++j) {
        const float a = v[j], b = v[j + H];
        v[j] = __fadd_rn(a, b);
        v[j + H] = __fsub_rn(a, b);
      }
    }
    butterfly<N, 2 * H>(v);
  }
}

// Codes as the GEMM's operand bytes: int8, or e4m3 (every integer in -8..7 is exact) for the FP8 GEMM.
template <int N>
__device__ __forceinline__ void to_operand(int8_t (&q)[N], bool fp8) {
  if (!fp8) return;
#pragma unroll
  for (int k = 0; k < N; ++k) q[k] = static_cast<int8_t>(e4m3_of_code(static_cast<float>(q[k])));
}

// Max over each aligned run of `width` lanes (a power of two up to 32; the whole warp by default), valid in every
// lane of the run: xor shuffles stay inside it. Over the whole warp one REDUX: amax_of is the max of the floats'
// bits as unsigned integers, which is what it computes (5 shuffles and 5 maxima before).
__device__ __forceinline__ float warp_max(float v, int width = 32) {
#if __CUDA_ARCH__ >= 800
  if (width == 32) return __uint_as_float(__reduce_max_sync(0xffffffffu, __float_as_uint(v)));
#endif
#pragma unroll
  for (int o = width / 2; o > 0; o /= 2) v = amax_of(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

__device__ __forceinline__ double warp_sum(double v) {
#pragma unroll
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Max over the block (result valid in every thread).
__device__ float block_max(float v) {
  __shared__ float partial[32];
  v = warp_max(v);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  __syncthreads();  // partial may still be read from a previous call
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  const int warps = (blockDim.x + 31) / 32;
  v = lane < warps ? partial[lane] : 0.0f;
  return warp_max(v);
}

// The key a rounding kernel's thread uses: as given, or hash_key of the step the device holds (HashKey).
__device__ __forceinline__ Dither resolve_key(const HashKey& k) {
  const uint32_t key =
      k.step == nullptr ? k.key : hash_key(k.seed, k.layer, static_cast<uint32_t>(*k.step), k.stream, k.rank);
  return Dither{key, k.rounds};
}

// --- g_x path: Q4(HT(g_y)) ------------------------------------------------------------------

// N biased codes (floor_code_biased) as the GEMM's operand bytes: int8 (the biased float's low byte), or e4m3
// two at a time (every integer in -16..16 is exact) for the FP8 GEMM.
template <int N>
__device__ __forceinline__ void biased_operand_bytes(const float (&biased)[N], bool fp8, int8_t (&out)[N]) {
  static_assert(N % 2 == 0 || N == 1, "codes are converted in pairs");
  if (fp8 && N > 1) {
#pragma unroll
    for (int k = 0; k + 1 < N; k += 2) {
      const uint16_t pair = e4m3x2_of_codes(biased_code_value(biased[k]), biased_code_value(biased[k + 1]));
      out[k] = static_cast<int8_t>(pair & 0xFFu);
      out[k + 1] = static_cast<int8_t>(pair >> 8);
    }
  } else {
#pragma unroll
    for (int k = 0; k < N; ++k) {
      out[k] = static_cast<int8_t>(fp8 ? e4m3_of_code(biased_code_value(biased[k])) : biased_code_byte(biased[k]));
    }
  }
}

// Stochastic codes of one chunk of N transformed values (u at row-major indices index, index + 1, ...), stored.
// index is a multiple of N: every caller's chunks start at multiples of N in rows of a multiple of N elements.
template <int N>
__device__ __forceinline__ void hq_store_chunk(const float (&v)[N], const Scale& sc, uint32_t index, Dither key,
                                               int qmax, bool fp8, int8_t* __restrict__ codes) {
  float biased[N];
  stochastic_run_codes_biased<N>(v, sc, index, key, qmax, biased);
  if constexpr (N % 4 == 0) {
    if (fp8) {  // whole 32-bit words of e4m3 pairs: no byte-by-byte reassembly before the vector store
      alignas(16) uint32_t words[N / 4];  // stored by store_codes as 16-byte vectors
#pragma unroll
      for (int j = 0; j < N / 4; ++j) {
        const float* b = biased + 4 * j;
        words[j] = e4m3x2_of_codes(biased_code_value(b[0]), biased_code_value(b[1])) |
                   static_cast<uint32_t>(e4m3x2_of_codes(biased_code_value(b[2]), biased_code_value(b[3]))) << 16;
      }
      store_codes<N>(codes, reinterpret_cast<const int8_t(&)[N]>(words));
      return;
    }
  }
  int8_t q[N];
  biased_operand_bytes<N>(biased, fp8, q);
  store_codes<N>(codes, q);
}

// One block per row, each thread's chunks of the transformed row kept in registers (at most Chunks): one read of
// g_y and one transform per element. The hash reads its index mod 2^32, so indices are 32-bit.
// Max over each group of `group` threads (a power of two up to 32, or a whole number of warps; the block's threads
// in consecutive groups), valid in every thread of the group. Every thread of the block calls it.
__device__ float group_max(float v, int group) {
  if (group < 32) return warp_max(v, group);  // the group's lanes are an aligned run within the warp
  __shared__ float partial[32];
  v = warp_max(v);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = group / 32;
  if (warps == 1) return v;
  __syncthreads();  // partial may still be read from a previous call
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  const int first = warp / warps * warps;
  v = lane < warps ? partial[first + lane] : 0.0f;
  return warp_max(v);
}

// The row's absmax Scale over the block (valid in every thread): one warp folds the warps' maxima and makes the
// scale and its reciprocal once, for every thread (block_max's second fold, the division and the reciprocal ran in
// every warp: about 35 instructions a warp a row, a twentieth of a 16-code chunk's).
__device__ Scale block_absmax_scale(float v, int qmax) {
  __shared__ float partial[32];
  __shared__ Scale shared;
  v = warp_max(v);
  if (blockDim.x <= 32) return scale_of(absmax_to_scale(v, qmax));  // one warp: nothing to exchange
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  __syncthreads();  // partial and shared may still be read from a previous call
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  if (warp == 0) {
    const int warps = (blockDim.x + 31) / 32;
    v = warp_max(lane < warps ? partial[lane] : 0.0f);
    if (lane == 0) shared = scale_of(absmax_to_scale(v, qmax));
  }
  __syncthreads();
  return shared;
}

// One row of g_y on `group` threads (t: this thread's place among them; the row's chunks t, t + group, ...),
// one read of the row and one transform per element, the chunks kept in registers (at most Chunks a thread);
// row_scale makes the row's Scale from each thread's amax (block_absmax_scale, or group_max's, by the caller). The
// hash reads its index mod 2^32, so indices are 32-bit.
template <typename T, int N, int Chunks, typename RowScale>
__device__ __forceinline__ void hq_row_codes(const T* __restrict__ g, int64_t cols, int64_t row, bool active, int t,
                                             int group, int qmax, const Dither& key, bool fp8,
                                             int8_t* __restrict__ codes, float* __restrict__ scale,
                                             RowScale row_scale) {
  const T* src = g + row * cols;
  const int chunks = active ? static_cast<int>(cols / N) : 0;
  float v[Chunks][N];
  float amax = 0.0f;
#pragma unroll
  for (int i = 0; i < Chunks; ++i) {
    const int c = t + i * group;
    if (c < chunks) {
      load_contiguous<T, N>(src + c * N, v[i]);
      butterfly<N>(v[i]);
#pragma unroll
      for (int k = 0; k < N; ++k) amax = amax_of(amax, fabsf(v[i][k]));
    }
  }
  const Scale sc = row_scale(amax);
  if (active && t == 0) scale[row] = sc.s;
  const uint32_t first = static_cast<uint32_t>(row) * static_cast<uint32_t>(cols);
#pragma unroll
  for (int i = 0; i < Chunks; ++i) {
    const int c = t + i * group;
    if (c < chunks) hq_store_chunk<N>(v[i], sc, first + c * N, key, qmax, fp8, codes + row * cols + c * N);
  }
}

// A block takes rows_per_block consecutive rows: the key (hash_key's five finalisers, in every thread where the
// step is on the device) is made once for all of them. Few rows a block keep blocks short-lived, so the g_w chain's
// kernels beside it on another stream still find free SMs (a grid of long-lived blocks, rows gridDim.x apart, ran in
// the same call as a slower latency figure, whose measured cause was hla_amax's spill: its own share was not measured).
template <typename T, int N, int Chunks>
__global__ void __launch_bounds__(kThreads, Chunks == 1 ? 5 : 1)
    hq_grad_output_per_token(const T* __restrict__ g, int64_t rows, int64_t cols, int rows_per_block, int qmax,
                             HashKey hash, bool fp8, int8_t* __restrict__ codes, float* __restrict__ scale) {
  const Dither key = resolve_key(hash);  // first: the step's load overlaps the row's
  const int64_t first = static_cast<int64_t>(blockIdx.x) * rows_per_block;
  for (int64_t row = first; row < first + rows_per_block && row < rows; ++row) {
    hq_row_codes<T, N, Chunks>(g, cols, row, true, threadIdx.x, blockDim.x, qmax, key, fp8, codes, scale,
                               [qmax](float m) { return block_absmax_scale(m, qmax); });
  }
}

// The absmax Scale of each of a block's `rows` rows, laid out consecutively across its threads (thread t in row r),
// valid in every thread for its own row; every thread of the block calls it, the block whole warps. A warp takes
// the maximum of its lanes in each row it touches with one REDUX a row (non-negative floats order as their bits, as
// amax_of), a shared atomic max a row and warp joins them, and one thread a row makes the Scale.
constexpr int kMaxPackedRows = 32;

__device__ Scale packed_rows_absmax_scale(float v, int r, int rows, int qmax) {
  __shared__ uint32_t row_amax[kMaxPackedRows];
  __shared__ Scale row_scale[kMaxPackedRows];
  __syncthreads();  // row_scale may still be read from a previous call
  if (threadIdx.x < rows) row_amax[threadIdx.x] = 0u;
  __syncthreads();
  const int first = __shfl_sync(0xffffffffu, r, 0), last = __shfl_sync(0xffffffffu, r, 31);
  for (int rr = first; rr <= last; ++rr) {
    const float m = warp_max(r == rr ? v : 0.0f);
    if (threadIdx.x % 32 == 0) atomicMax(&row_amax[rr], __float_as_uint(m));
  }
  __syncthreads();
  if (threadIdx.x < rows) {
    row_scale[threadIdx.x] = scale_of(absmax_to_scale(__uint_as_float(row_amax[threadIdx.x]), qmax));
  }
  __syncthreads();
  return row_scale[r];
}

// Per-token rows of one chunk a thread, `packed` rows side by side in a block of packed x chunks threads (whole
// warps): where a row's chunks are not a multiple of 32 (O = 2304: 144 chunks, 4.5 warps; O = 768: 48, 1.5 warps)
// a row a block left the last warp's lanes idle, 10-25 % of the issued instructions. A block takes `passes` such
// groups of rows, the key made once for all of them.
constexpr int kPackedThreads = 320;

template <typename T, int N>
__global__ void __launch_bounds__(kPackedThreads, 4)
    hq_grad_output_packed_rows(const T* __restrict__ g, int64_t rows, int64_t cols, int packed, int passes, int qmax,
                               HashKey hash, bool fp8, int8_t* __restrict__ codes, float* __restrict__ scale) {
  const Dither key = resolve_key(hash);  // first: the step's load overlaps the row's
  const int chunks = static_cast<int>(cols / N);
  const int r = static_cast<int>(threadIdx.x) / chunks, t = static_cast<int>(threadIdx.x) - r * chunks;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * passes * packed;
  for (int p = 0; p < passes; ++p) {
    const int64_t base = first + static_cast<int64_t>(p) * packed;
    if (base >= rows) break;  // block-uniform
    const int64_t row = base + r;
    const bool active = row < rows;
    hq_row_codes<T, N, 1>(g, cols, active ? row : base, active, t, chunks, qmax, key, fp8, codes, scale,
                          [r, packed, qmax](float m) { return packed_rows_absmax_scale(m, r, packed, qmax); });
  }
}

// Rows too long for the registers: pass 1 transforms and takes the row's amax, pass 2 transforms again (the row
// is in L1/L2) and quantises.
template <typename T, int N>
__global__ void hq_grad_output_per_token_long(const T* __restrict__ g, int64_t cols, int qmax, HashKey hash, bool fp8,
                                              int8_t* __restrict__ codes, float* __restrict__ scale) {
  const int64_t row = blockIdx.x;
  const T* src = g + row * cols;
  const int64_t chunks = cols / N;
  float amax = 0.0f;
  for (int64_t c = threadIdx.x; c < chunks; c += blockDim.x) {
    float v[N];
    load_contiguous<T, N>(src + c * N, v);
    butterfly<N>(v);
#pragma unroll
    for (int k = 0; k < N; ++k) amax = amax_of(amax, fabsf(v[k]));
  }
  const Scale sc = block_absmax_scale(amax, qmax);
  if (threadIdx.x == 0) scale[row] = sc.s;
  const Dither key = resolve_key(hash);
  const uint32_t first = static_cast<uint32_t>(row) * static_cast<uint32_t>(cols);
  for (int64_t c = threadIdx.x; c < chunks; c += blockDim.x) {
    float v[N];
    load_contiguous<T, N>(src + c * N, v);
    butterfly<N>(v);
    hq_store_chunk<N>(v, sc, first + static_cast<uint32_t>(c) * N, key, qmax, fp8, codes + row * cols + c * N);
  }
}

// Per tensor, pass 1: amax of the transformed tensor (max is order-free, so atomics stay deterministic).
template <typename T, int N>
__global__ void hq_grad_output_amax(const T* __restrict__ g, int64_t chunks, uint32_t* amax_bits) {
  float amax = 0.0f;
  for (int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; c < chunks;
       c += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float v[N];
    load_contiguous<T, N>(g + c * N, v);
    butterfly<N>(v);
#pragma unroll
    for (int k = 0; k < N; ++k) amax = amax_of(amax, fabsf(v[k]));
  }
  amax = block_max(amax);
  if (threadIdx.x == 0) atomicMax(amax_bits, __float_as_uint(amax));  // non-negative floats order as uints
}

template <typename T, int N>
__global__ void hq_grad_output_quantize(const T* __restrict__ g, int64_t chunks, int qmax, HashKey hash, bool fp8,
                                        const uint32_t* amax_bits, int8_t* __restrict__ codes,
                                        float* __restrict__ scale) {
  const float s = absmax_to_scale(__uint_as_float(*amax_bits), qmax);
  if (blockIdx.x == 0 && threadIdx.x == 0) *scale = s;
  const Scale sc = scale_of(s);
  const Dither key = resolve_key(hash);
  for (int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; c < chunks;
       c += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float v[N];
    load_contiguous<T, N>(g + c * N, v);
    butterfly<N>(v);
    hq_store_chunk<N>(v, sc, static_cast<uint32_t>(c) * N, key, qmax, fp8, codes + c * N);
  }
}

int grid_for(int64_t work) {
  const int64_t blocks = (work + kThreads - 1) / kThreads;
  return static_cast<int>(blocks < 1 ? 1 : (blocks > kMaxGrid ? kMaxGrid : blocks));
}

dim3 dequantize_grid(int64_t m, int64_t n) {
  const int64_t x = (n + 4 * kThreads - 1) / (4 * kThreads);
  return dim3(static_cast<unsigned>(x), static_cast<unsigned>(m < 65535 ? m : 65535));
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

template <typename T, int N>
void launch_hq_grad_output(const T* g, int64_t rows, int64_t cols, int qmax, bool per_token, HashKey key, bool fp8,
                           int8_t* codes, float* scale, uint32_t* amax_bits, cudaStream_t stream) {
  if (per_token) {
    // Whole warps covering a row once where possible, at most 256: no idle warps, so more rows fit on an SM (e.g.
    // 160 threads, not 256, for O = 2304). Rows of up to 4 chunks a thread stay in registers (O <= 16384 at N = 16).
    const int64_t chunks = cols / N;
    const auto warps_for = [](int64_t n) { return static_cast<int>((n + 31) / 32 * 32); };
    const auto rows_u = static_cast<unsigned>(rows);
    // A row a block below 2 kMaxGrid rows, then rows / kMaxGrid rounded down, at most 4 (the key's cost spread over
    // them, the blocks still short)
    const int per_block = static_cast<int>(std::clamp<int64_t>(rows / kMaxGrid, 1, 4));
    const auto grid = static_cast<unsigned>((rows + per_block - 1) / per_block);
    if constexpr (N == 16) {
      // Rows packed so that a block's threads fill whole warps, where few enough rows do it
      const int64_t packed = 32 / std::gcd<int64_t>(chunks, 32);
      if (packed > 1 && packed * chunks <= kPackedThreads) {
        const int64_t groups = (rows + packed - 1) / packed;
        const int passes = static_cast<int>(std::clamp<int64_t>(groups / kMaxGrid, 1, 4));
        const auto blocks = static_cast<unsigned>((groups + passes - 1) / passes);
        hq_grad_output_packed_rows<T, N><<<blocks, static_cast<unsigned>(packed * chunks), 0, stream>>>(
            g, rows, cols, static_cast<int>(packed), passes, qmax, key, fp8, codes, scale);
        return;
      }
      if (chunks <= kThreads) {
        hq_grad_output_per_token<T, N, 1><<<grid, warps_for(chunks), 0, stream>>>(g, rows, cols, per_block, qmax, key,
                                                                                  fp8, codes, scale);
        return;
      }
      if (chunks <= 2 * kThreads) {
        hq_grad_output_per_token<T, N, 2><<<grid, warps_for((chunks + 1) / 2), 0, stream>>>(g, rows, cols, per_block,
                                                                                            qmax, key, fp8, codes,
                                                                                            scale);
        return;
      }
      if (chunks <= 4 * kThreads) {
        hq_grad_output_per_token<T, N, 4><<<grid, warps_for((chunks + 3) / 4), 0, stream>>>(g, rows, cols, per_block,
                                                                                            qmax, key, fp8, codes,
                                                                                            scale);
        return;
      }
    }
    const int threads = chunks >= kThreads ? kThreads : warps_for(chunks);
    hq_grad_output_per_token_long<T, N><<<rows_u, threads, 0, stream>>>(g, cols, qmax, key, fp8, codes, scale);
  } else {
    const int64_t chunks = rows * cols / N;
    hq_grad_output_amax<T, N><<<grid_for(chunks), kThreads, 0, stream>>>(g, chunks, amax_bits);
    hq_grad_output_quantize<T, N><<<grid_for(chunks), kThreads, 0, stream>>>(g, chunks, qmax, key, fp8, amax_bits,
                                                                              codes, scale);
  }
}

// --- g_x path: Q4(HT(W)) with SAWB --------------------------------------------------------------


// Thread per (block of N rows, column): N strided loads (coalesced across the warp's columns).
template <typename T, int N>
__device__ __forceinline__ void load_column_block(const T* w, int64_t in_cols, int64_t g, int64_t col, float (&v)[N]) {
#pragma unroll
  for (int k = 0; k < N; ++k) v[k] = to_float(w[(g * N + k) * in_cols + col]);
}

// The CTAs that see any item: sawb_partials's grid. Below kSawbBlocks of them every thread has at most one item, the
// one it would have in a grid of kSawbBlocks, so each CTA's partials keep their bits, and the sums and the max fold
// these CTAs' partials only. A full grid of kSawbBlocks for a small W (the latency figure's) left hundreds of empty
// CTAs taking SM slots from the kernels beside it on other streams.
__host__ __device__ __forceinline__ int sawb_blocks_used(int64_t work) {
  const int64_t used = (work + kThreads - 1) / kThreads;
  return used < kSawbBlocks ? static_cast<int>(used) : kSawbBlocks;
}

// Pass 1: per-block partial sums of b^2 and |b| (double: exact products, tiny rounding) and max |b|.
// A grid fixed by W's shape and a fixed tree make the result deterministic.
template <typename T, int N>
__global__ void sawb_partials(const T* __restrict__ w, int64_t groups, int64_t in_cols, double* partials) {
  double s2 = 0.0, s1 = 0.0;
  float amax = 0.0f;
  const int64_t work = groups * in_cols;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < work;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float v[N];
    load_column_block<T, N>(w, in_cols, i / in_cols, i % in_cols, v);
    butterfly<N>(v);
#pragma unroll
    for (int k = 0; k < N; ++k) {
      const double d = v[k];
      s2 += d * d;
      s1 += fabs(d);
      amax = amax_of(amax, fabsf(v[k]));  // a NaN wins, as in hot.quant.sawb_scale (its scale is then 1)
    }
  }
  __shared__ double p2[kThreads / 32], p1[kThreads / 32];
  s2 = warp_sum(s2);
  s1 = warp_sum(s1);
  amax = block_max(amax);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) {
    p2[warp] = s2;
    p1[warp] = s1;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    double t2 = 0.0, t1 = 0.0;
    for (int i = 0; i < kThreads / 32; ++i) {
      t2 += p2[i];
      t1 += p1[i];
    }
    partials[3 * blockIdx.x] = t2;
    partials[3 * blockIdx.x + 1] = t1;
    partials[3 * blockIdx.x + 2] = amax;
  }
}

// Pass 2: transform again, round to nearest, write W's codes transposed (N contiguous bytes per thread). Every CTA
// makes hot.quant.sawb_scale from pass 1's partials itself, so no one-thread kernel sits between the passes on every
// layer's critical path; CTA 0 writes it for the caller. Warp 0 folds the two sums and warp 1 the max, each lane its
// own triples (loads issued together, no staging) and then the warp's butterfly (quant_scalar.cuh's order, which
// the CPU test checks against the reference): every CTA gets the same bits. Loading each thread's first column
// block before the fold measured no gain (an H200 A/B: 372.2 against 372.8 us over the figure's 16 layers, each
// layer within 1.1 us either way; slower on the H100 beside the serial fold), so every load follows the scale.
// The body, for CTA `block` of `blocks` (the kernel's own grid, or its share of a launch with other work), on
// blocks of at least two warps (the fold's).
static_assert(kThreads >= 64, "weight_quantize's blocks hold the fold's two warps");
template <typename T, int N>
__device__ __forceinline__ void weight_quantize_block(const T* __restrict__ w, int64_t groups, int64_t in_cols,
                                                      const double* __restrict__ partials, bool sawb4, int qmax,
                                                      bool fp8, int8_t* __restrict__ codes_t,
                                                      float* __restrict__ scale, float* __restrict__ column_scales,
                                                      unsigned block, unsigned blocks) {
  __shared__ double sums[2];
  __shared__ float amax;
  const int64_t work = groups * in_cols, out_rows = groups * N;
  const int used = sawb_blocks_used(work);  // pass 1's grid: the partials written
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (warp == 0) {
    double v2[kSawbPerLane], v1[kSawbPerLane];  // both components' loads in flight at once
    sawb_lane_values(partials, used, 0, lane, v2);
    sawb_lane_values(partials, used, 1, lane, v1);
    const double s2 = warp_sum(sawb_lane_sum(v2)), s1 = warp_sum(sawb_lane_sum(v1));
    if (lane == 0) {
      sums[0] = s2;
      sums[1] = s1;
    }
  } else if (warp == 1) {
    double v[kSawbPerLane];
    sawb_lane_values(partials, used, 2, lane, v);
    const float m = warp_max(sawb_lane_max(v));
    if (lane == 0) amax = m;
  }
  __syncthreads();
  const float s = sawb_scale_from_sums(sums[0], sums[1], amax, static_cast<double>(work * N), sawb4, qmax);
  if (block == 0 && threadIdx.x == 0) *scale = s;
  const Scale sc = scale_of(s);
  for (int64_t i = block * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < work;
       i += static_cast<int64_t>(blocks) * blockDim.x) {
    const int64_t g = i / in_cols, col = i % in_cols;
    if (g == 0 && column_scales != nullptr) column_scales[col] = __fmul_rn(s, 1.0f / N);
    float v[N];
    load_column_block<T, N>(w, in_cols, g, col, v);
    butterfly<N>(v);
    int8_t q[N];
#pragma unroll
    for (int k = 0; k < N; ++k) q[k] = nearest_code(v[k], sc, qmax);
    to_operand(q, fp8);
    store_codes<N>(codes_t + col * out_rows + g * N, q);
  }
}

template <typename T, int N>
__global__ void weight_quantize(const T* __restrict__ w, int64_t groups, int64_t in_cols,
                                const double* __restrict__ partials, bool sawb4, int qmax, bool fp8,
                                int8_t* __restrict__ codes_t, float* __restrict__ scale,
                                float* __restrict__ column_scales) {
  weight_quantize_block<T, N>(w, groups, in_cols, partials, sawb4, qmax, fp8, codes_t, scale, column_scales,
                              blockIdx.x, gridDim.x);
}

template <typename T, int N>
void launch_weight(const T* w, int64_t out_rows, int64_t in_cols, int qmax, bool sawb4, bool fp8, int8_t* codes_t,
                   float* scale, float* column_scales, double* partials, cudaStream_t stream) {
  const int64_t groups = out_rows / N;
  sawb_partials<T, N><<<sawb_blocks_used(groups * in_cols), kThreads, 0, stream>>>(w, groups, in_cols, partials);
  weight_quantize<T, N><<<grid_for(groups * in_cols), kThreads, 0, stream>>>(w, groups, in_cols, partials, sawb4,
                                                                             qmax, fp8, codes_t, scale,
                                                                             column_scales);
}

// W's code pass beside g_y's per-token HQ quantiser, in one launch: CTAs [0, w_blocks) run weight_quantize's code
// pass, the others g_y's rows, blockDim.x / group rows a CTA, each on `group` threads (group_max's: a power of two
// up to a warp, else whole warps) as hq_grad_output_per_token runs a row on a block of `group` threads: the same
// bits (a row's codes depend on its chunks' indices, not on the threads; its amax is a max). The block is the most
// whole groups in kThreads threads, so no thread idles where g_y is large (160 threads for a row of 144 chunks, as
// the per-token kernel has it), and short rows share warps (ResNet's 64 channels: 4 threads a row, 64 rows a CTA;
// on a warp a row, 28 of its 32 threads idled and the launch took 8 times the CTAs). In a
// captured backward the g_x chain is then W's statistics pass, this launch and the GEMM on one stream: no stream of
// W's own to fork and wait for.
template <typename TW, typename TG, int N, int Chunks>
__global__ void weight_and_grad_output_codes(const TW* __restrict__ w, int64_t groups, int64_t in_cols,
                                             const double* __restrict__ partials, bool sawb4, int qmax, bool w_fp8,
                                             int8_t* __restrict__ w_codes_t, float* __restrict__ w_scale,
                                             float* __restrict__ column_scales, unsigned w_blocks,
                                             const TG* __restrict__ g, int64_t rows, int64_t cols, HashKey hash,
                                             bool g_fp8, int8_t* __restrict__ g_codes, float* __restrict__ g_scale,
                                             int group) {
  if (blockIdx.x < w_blocks) {  // block-uniform
    weight_quantize_block<TW, N>(w, groups, in_cols, partials, sawb4, qmax, w_fp8, w_codes_t, w_scale, column_scales,
                                 blockIdx.x, w_blocks);
    return;
  }
  const Dither key = resolve_key(hash);
  const int per_block = static_cast<int>(blockDim.x) / group, slot = static_cast<int>(threadIdx.x) / group;
  const int64_t row = static_cast<int64_t>(blockIdx.x - w_blocks) * per_block + slot;
  const bool active = row < rows;  // every thread takes part in the row maxima's barriers
  hq_row_codes<TG, N, Chunks>(g, cols, row, active, static_cast<int>(threadIdx.x) % group, group, qmax, key, g_fp8,
                              g_codes, g_scale,
                              [group, qmax](float m) { return scale_of(absmax_to_scale(group_max(m, group), qmax)); });
}

template <typename TW, typename TG, int Chunks>
void launch_weight_and_grad_output(const TW* w, int64_t out_rows, int64_t in_cols, int qmax, bool sawb4, bool w_fp8,
                                   int8_t* w_codes_t, float* w_scale, float* column_scales, double* partials,
                                   const TG* g, int64_t rows, int64_t cols, HashKey key, bool g_fp8, int8_t* g_codes,
                                   float* g_scale, int group, cudaStream_t stream) {
  constexpr int N = 16;
  const int64_t groups = out_rows / N, work = groups * in_cols;
  const int per_block = kThreads / group, threads = per_block * group;  // >= 160: two warps for W's fold
  const int64_t w_blocks = std::min<int64_t>((work + threads - 1) / threads, kMaxGrid);
  const auto g_blocks = static_cast<unsigned>((rows + per_block - 1) / per_block);
  sawb_partials<TW, N><<<sawb_blocks_used(work), kThreads, 0, stream>>>(w, groups, in_cols, partials);
  weight_and_grad_output_codes<TW, TG, N, Chunks><<<static_cast<unsigned>(w_blocks) + g_blocks, threads, 0, stream>>>(
      w, groups, in_cols, partials, sawb4, qmax, w_fp8, w_codes_t, w_scale, column_scales,
      static_cast<unsigned>(w_blocks), g, rows, cols, key, g_fp8, g_codes, g_scale, group);
}

// --- g_w path: HLA projection + quantise along tokens ---------------------------------------------

constexpr int kHla = kHlaSlots;
constexpr int kHlaThreads = 128;
constexpr int kTileBlocks = 8;   // sample-blocks (8 x 16 tokens) per CTA tile
constexpr int kTileGroups = 16;  // channel groups of Vec channels per CTA tile

struct HlaRows {
  int slot[kHla];  // the tile row where basis row m is parked: its place j among the kept rows (projected row j)
  unsigned mask;   // bit m set when basis row m is kept
};

// The kept rows, `rank` distinct basis rows in projected-row order, as HlaRows.
HOT_HD constexpr HlaRows hla_rows(const int* rows, int rank) {
  HlaRows kept{};
  for (int j = 0; j < rank; ++j) {
    kept.slot[rows[j]] = j;
    kept.mask |= 1u << rows[j];
  }
  return kept;
}

// kPaperRows as HlaRows, for kernels compiled with them as constants: the amax pass then issues the maxima of the 8
// kept rows alone and the code pass parks them at constant offsets, where rows read at run time issue all 16
// predicated.
HOT_HD constexpr HlaRows paper_rows() { return hla_rows(kPaperRows, kPaperRank); }

// The rows a kernel uses: the constants where it is compiled for the paper's (Paper), else the call's.
template <bool Paper>
__device__ __forceinline__ HlaRows kept_rows(const HlaRows& rows) {
  if constexpr (Paper) {
    constexpr HlaRows paper = paper_rows();
    return paper;
  } else {
    return rows;
  }
}

// Whether a call's rows are the paper's: the same rows in the same order.
bool is_paper_rows(const HlaRows& rows) {
  constexpr HlaRows paper = paper_rows();
  if (rows.mask != paper.mask) return false;
  for (int j = 0; j < kPaperRank; ++j) {
    if (rows.slot[kPaperRows[j]] != j) return false;
  }
  return true;
}

// The 16 slots of unit sb for channels c..c+Vec, zero where padded: 16 row loads of Vec contiguous elements
// (coalesced along the channel axis across the tile's threads), at 32-bit offsets from one 64-bit address.
template <typename T, int Vec>
__device__ __forceinline__ void hla_load_raw(const T* __restrict__ t, const HlaShape& sh, const HlaUnit& u,
                                             int64_t c, float (&v)[Vec][kHla]) {
  const T* first = t + u.first * sh.channels + c;
  const HlaSlots slots = hla_slots(sh, u, static_cast<uint32_t>(sh.channels));
#pragma unroll
  for (int k = 0; k < kHla; ++k) {
    // A padding slot's load is predicated off, its registers left zero (+0.0f once widened)
    uint32_t offset;
    const bool inside = hla_slot(slots, k, offset);
    float e[Vec];
    load_contiguous_if<T, Vec>(inside, first + offset, e);
#pragma unroll
    for (int i = 0; i < Vec; ++i) v[i][k] = e[i];
  }
}

// H_16 along one channel's slots. A prefix unit holds its token in slot 0 alone, so every row is that value; times
// 4 it is hla_project's prefix row (an exact power-of-two scale). The 4 is applied to slot 0 before the butterfly,
// which then only adds zeros to it: the same bits as scaling the 16 rows after (the signs of zeros included), one
// multiply a channel instead of a multiply and a select a slot (x 1 for a window unit is exact).
__device__ __forceinline__ void hla_transform_channel(bool prefix, float (&v)[kHla]) {
  v[0] = __fmul_rn(v[0], prefix ? 4.0f : 1.0f);
  butterfly<kHla>(v);
}

template <int Vec>
__device__ __forceinline__ void hla_transform(const HlaUnit& u, float (&v)[Vec][kHla]) {
#pragma unroll
  for (int i = 0; i < Vec; ++i) hla_transform_channel(u.prefix, v[i]);
}

// The same slots transformed (H_16 v, prefix rows scaled).
template <typename T, int Vec>
__device__ __forceinline__ void hla_load(const T* __restrict__ t, const HlaShape& sh, int64_t sb, int64_t c,
                                         float (&v)[Vec][kHla]) {
  const HlaUnit u = hla_unit_at(sh, sb);
  hla_load_raw<T, Vec>(t, sh, u, c, v);
  hla_transform<Vec>(u, v);
}

// A block's tile: its row of tiles (tile_b) and channel tile (tile_c); blocks number below 2^31 (a grid's x extent).
struct HlaTileAt {
  uint32_t b, c;
};

__device__ __forceinline__ HlaTileAt hla_tile_at(const HlaShape& sh, int64_t block) {
  const uint32_t n = static_cast<uint32_t>(block), b = quotient(n, sh.by_tiles_c);
  return HlaTileAt{b, n - b * static_cast<uint32_t>(sh.tiles_c)};
}

// This thread's load unit of tile `block`: sample-block and first channel (negative when outside the tensor).
__device__ __forceinline__ void hla_unit(const HlaShape& sh, int vec, int64_t block, int64_t& sb, int64_t& c) {
  const HlaTileAt tile = hla_tile_at(sh, block);
  sb = static_cast<int64_t>(tile.b) * kTileBlocks + threadIdx.x / kTileGroups;
  c = (static_cast<int64_t>(tile.c) * kTileGroups + threadIdx.x % kTileGroups) * vec;
  if (sb >= sh.sblocks || c >= sh.channels) sb = -1;
}

// The tile's sum over its units of each of its channels, written to column_partials[tile_b * C + channel]. A
// unit's slot sum is row 0 of H_16 v (the butterfly's all-plus row; a prefix unit's is 4 x its token, exactly), so
// the sums cost no pass over memory. Units are added in a fixed order: the same bits on every run.
template <int Vec>
__device__ __forceinline__ void hla_tile_column_sums(const HlaShape& sh, const float (&unit_sum)[Vec],
                                                     float* __restrict__ column_partials, int64_t block) {
  __shared__ float warp_sums[kHlaThreads / 32][kTileGroups * Vec];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  float s[Vec];
#pragma unroll
  for (int i = 0; i < Vec; ++i) {
    // lanes l and l + 16 hold the same channels of two units (a + b and b + a are the same float)
    s[i] = __fadd_rn(unit_sum[i], __shfl_xor_sync(0xffffffffu, unit_sum[i], kTileGroups));
    if (lane < kTileGroups) warp_sums[warp][lane * Vec + i] = s[i];
  }
  __syncthreads();
  if (threadIdx.x < kTileGroups * Vec) {
    float total = warp_sums[0][threadIdx.x];
#pragma unroll
    for (int w = 1; w < kHlaThreads / 32; ++w) total = __fadd_rn(total, warp_sums[w][threadIdx.x]);
    const HlaTileAt tile = hla_tile_at(sh, block);
    const int64_t channel = static_cast<int64_t>(tile.c) * kTileGroups * Vec + threadIdx.x;
    if (channel < sh.channels) column_partials[tile.b * sh.channels + channel] = total;
  }
}

// A unit's 16 slots of Vec channels as loaded (the input type's bits, zero where padded): a bf16 unit of 4 channels
// is 32 registers, widened to float one channel at a time (71 registers in hla_amax, not 80: 7 CTAs an SM, not 6).
template <typename T, int Vec>
struct HlaRawUnit {
  static constexpr int kBytes = Vec * static_cast<int>(sizeof(T));
  using V = typename VecOf<kBytes>::type;
  V slot[kHla];
};

template <typename T, int Vec>
__device__ __forceinline__ void hla_load_unit(const T* __restrict__ t, const HlaShape& sh, const HlaUnit& u, int64_t c,
                                              HlaRawUnit<T, Vec>& raw) {
  using V = typename HlaRawUnit<T, Vec>::V;
  const T* first = t + u.first * sh.channels + c;
  const HlaSlots slots = hla_slots(sh, u, static_cast<uint32_t>(sh.channels));
#pragma unroll
  for (int k = 0; k < kHla; ++k) {
    uint32_t offset;
    const bool inside = hla_slot(slots, k, offset);
    // a padding slot's load is predicated off, its registers left zero
    raw.slot[k] = V{};
    if (inside) raw.slot[k] = __ldg(reinterpret_cast<const V*>(first + offset));
  }
}

// 16-bit inputs at most 64 registers: 8 CTAs an SM (the compiler's own choice, 71, holds 7; at 64 nvcc 13.0 spills
// 4 bytes, one store and one load a thread: the pass ran 3 % faster on the H200). A float unit's raw
// slots alone are 64 registers: held to 64 it spilled (92 bytes a thread; x's quantiser 14 % slower on the H200).
template <typename T, int Vec, bool Paper>
__global__ void __launch_bounds__(kHlaThreads, sizeof(T) == 2 ? 8 : 1)
    hla_amax(const T* __restrict__ t, HlaShape sh, HlaRows rows, bool per_channel, uint32_t* amax_bits,
             float* __restrict__ column_partials) {
  const unsigned mask = kept_rows<Paper>(rows).mask;
  int64_t sb, c;
  hla_unit(sh, Vec, blockIdx.x, sb, c);
  float m[Vec] = {};
  float unit_sum[Vec] = {};
  if (sb >= 0) {
    HlaRawUnit<T, Vec> raw;
    hla_load_unit<T, Vec>(t, sh, hla_unit_at(sh, sb), c, raw);
    const bool prefix = sb >= sh.window_units;
#pragma unroll
    for (int i = 0; i < Vec; ++i) {
      float v[kHla];
#pragma unroll
      for (int k = 0; k < kHla; ++k) v[k] = to_float(reinterpret_cast<const T*>(&raw.slot[k])[i]);
      hla_transform_channel(prefix, v);
      unit_sum[i] = prefix ? __fmul_rn(v[0], 0.25f) : v[0];
#pragma unroll
      for (int k = 0; k < kHla; ++k) {
        if (mask >> k & 1u) m[i] = amax_of(m[i], fabsf(v[k]));
      }
    }
  }
  if (column_partials != nullptr) hla_tile_column_sums<Vec>(sh, unit_sum, column_partials, blockIdx.x);
  if (per_channel) {
    // lanes l and l + 16 hold the same channels (kTileGroups = 16): one atomic for both
#pragma unroll
    for (int i = 0; i < Vec; ++i) {
      m[i] = amax_of(m[i], __shfl_xor_sync(0xffffffffu, m[i], kTileGroups));
      if (threadIdx.x % 32 < kTileGroups && __float_as_uint(m[i]) != 0u) {
        atomicMax(amax_bits + c + i, __float_as_uint(m[i]));
      }
    }
  } else {
    float a = 0.0f;
#pragma unroll
    for (int i = 0; i < Vec; ++i) a = amax_of(a, m[i]);
    a = block_max(a);
    if (threadIdx.x == 0) atomicMax(amax_bits, __float_as_uint(a));  // non-negative floats order as uints
  }
}

// rank codes packed little-endian in w, stored with one vector store where rank and alignment allow (a
// sample's odd prefix count shifts the rows of the next channel).
__device__ __forceinline__ void store_packed(int8_t* out, const uint32_t (&w)[4], int rank) {
  const auto at = reinterpret_cast<uintptr_t>(out);
  if (rank == 16 && at % 16 == 0) {
    *reinterpret_cast<uint4*>(out) = make_uint4(w[0], w[1], w[2], w[3]);
  } else if (rank == 8 && at % 8 == 0) {
    *reinterpret_cast<uint2*>(out) = make_uint2(w[0], w[1]);
  } else if (rank == 4 && at % 4 == 0) {
    *reinterpret_cast<uint32_t*>(out) = w[0];
  } else {
#pragma unroll
    for (int j = 0; j < kHla; ++j) {
      if (j < rank) out[j] = static_cast<int8_t>(w[j / 4] >> (8 * (j % 4)));
    }
  }
}

template <int Vec>
struct HlaTile {
  static constexpr int kCols = kTileGroups * Vec;
  static constexpr int kStride = kHla * kCols + 4;  // the +4 puts the 8 sample-blocks of phase 2 in distinct banks
  static constexpr int kFloats = kTileBlocks * kStride;
};

// Phase 1's end: park this thread's kept (transformed) rows in the tile, in projected-row order (basis row m at tile
// row slot[m]), so phase 2 reads its rows at constant offsets.
template <int Vec>
__device__ __forceinline__ void hla_park(float* tile, const HlaRows& rows, const float (&v)[Vec][kHla]) {
  constexpr int kCols = HlaTile<Vec>::kCols;
  float* dst = tile + (threadIdx.x / kTileGroups) * HlaTile<Vec>::kStride + (threadIdx.x % kTileGroups) * Vec;
#pragma unroll
  for (int k = 0; k < kHla; ++k) {
    if (rows.mask >> k & 1u) {
      if constexpr (Vec == 4) {
        *reinterpret_cast<float4*>(dst + rows.slot[k] * kCols) = make_float4(v[0][k], v[1][k], v[2][k], v[3][k]);
      } else {
#pragma unroll
        for (int i = 0; i < Vec; ++i) dst[rows.slot[k] * kCols + i] = v[i][k];
      }
    }
  }
}

// The codes of one unit's `count` projected rows in one channel (src: its projected row 0 in the tile, rows kCols
// apart; u of row j drawn at index + j * stride), packed little-endian and stored at out. MaxRank (1, 8 or 16) bounds
// count (Full: count is MaxRank, no guards); rows past count are zero and not stored.
template <int MaxRank, bool Full, bool Stochastic, int kCols>
__device__ __forceinline__ void hla_quantize_unit(const float* src, int count, const Scale& sc, uint32_t index,
                                                  uint32_t stride, Dither key, int qmax, int8_t* __restrict__ out) {
  float x[MaxRank];
#pragma unroll
  for (int j = 0; j < MaxRank; ++j) x[j] = Full || j < count ? src[j * kCols] : 0.0f;
  uint32_t w[4] = {0u, 0u, 0u, 0u};
  if constexpr (Stochastic) {
    float biased[MaxRank];
    stochastic_codes_biased<MaxRank>(x, sc, index, stride, key, qmax, biased);
#pragma unroll
    for (int j = 0; j < MaxRank; ++j) w[j / 4] |= static_cast<uint32_t>(biased_code_byte(biased[j])) << (8 * (j % 4));
  } else {
    float q[MaxRank];
    group_quotients<MaxRank>(x, sc, q);
#pragma unroll
    for (int j = 0; j < MaxRank; ++j) {
      w[j / 4] |= static_cast<uint32_t>(biased_code_byte(round_code_biased(q[j], qmax))) << (8 * (j % 4));
    }
  }
  store_packed(out, w, count);
}

// The codes of one unit's Rank (1 or 8) projected rows in 4 consecutive channels (src: the tile's projected row 0 of
// the first, rows kCols apart), as hla_quantize_unit's for each channel. Element (row0 + j, c + i) draws u at index
// (row0 + j)·C + c + i; C and c are multiples of 4, so that index's xorshift16 is the row's, of (row0 + j)·C + c,
// XOR i (stochastic_run_codes_biased's identity): one xorshift a row for the 4 channels where a channel at a time
// took one a code, and a row's 4 values in one 16-byte shared load.
template <int Rank, bool Stochastic, int kCols>
__device__ __forceinline__ void hla_quantize_quad(const float* src, const Scale (&sc)[4], uint32_t index,
                                                  uint32_t channels, Dither key, int qmax, int8_t* __restrict__ out,
                                                  int64_t pitch) {
  float4 x[Rank];
  uint32_t row_x[Rank];
#pragma unroll
  for (int j = 0; j < Rank; ++j) {
    x[j] = *reinterpret_cast<const float4*>(src + j * kCols);
    row_x[j] = xorshift16(index + static_cast<uint32_t>(j) * channels);
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    float v[Rank];
#pragma unroll
    for (int j = 0; j < Rank; ++j) v[j] = i == 0 ? x[j].x : i == 1 ? x[j].y : i == 2 ? x[j].z : x[j].w;
    uint32_t w[4] = {0u, 0u, 0u, 0u};
    if constexpr (Stochastic) {
      uint32_t mixed[Rank];
#pragma unroll
      for (int j = 0; j < Rank; ++j) mixed[j] = row_x[j] ^ static_cast<uint32_t>(i);
      float biased[Rank];
      stochastic_codes_of_mixed<Rank>(v, sc[i], mixed, key, qmax, biased);
#pragma unroll
      for (int j = 0; j < Rank; ++j) w[j / 4] |= static_cast<uint32_t>(biased_code_byte(biased[j])) << (8 * (j % 4));
    } else {
      float q[Rank];
      group_quotients<Rank>(v, sc[i], q);
#pragma unroll
      for (int j = 0; j < Rank; ++j) {
        w[j / 4] |= static_cast<uint32_t>(biased_code_byte(round_code_biased(q[j], qmax))) << (8 * (j % 4));
      }
    }
    store_packed(out + i * pitch, w, Rank);
  }
}

// Phase 2 (after a barrier): each thread quantises the rank kept rows of one (channel, sample-block) pair,
// sample-blocks fastest across lanes, so a warp stores 4 channels x 8 x rank contiguous bytes of the
// transposed (C x R) codes.
// Quads: the paper's rank and prefix units by hla_quantize_quad (Vec == 4). The one-launch kernels, whose small
// tensors run a CTA or two an SM and stall on instruction fetch, keep the shorter loop alone: with both, the latency
// figure's layers at the paper's L were 2-10 % slower on the H200.
template <int Vec, bool Stochastic, bool Quads>
__device__ __forceinline__ void hla_store(const float* tile, const HlaShape& sh, int qmax,
                                          bool per_channel, Dither key, const uint32_t* __restrict__ amax_bits,
                                          int8_t* __restrict__ codes_t, float* __restrict__ scale,
                                          int64_t block) {
  constexpr int kCols = HlaTile<Vec>::kCols;
  const float s_tensor = per_channel ? 0.0f : absmax_to_scale(__uint_as_float(*amax_bits), qmax);
  if (!per_channel && block == 0 && threadIdx.x == 0) *scale = s_tensor;
  const Scale sc_tensor = scale_of(s_tensor);
  const HlaTileAt at = hla_tile_at(sh, block);
  const uint32_t channels = static_cast<uint32_t>(sh.channels);
  // A thread keeps one sample-block (its unit: rows, count and first index) and steps through channels kStep apart.
  constexpr int kStep = kHlaThreads / kTileBlocks;
  static_assert(kHlaThreads % kTileBlocks == 0, "every thread keeps its sample-block across the loop");
  const int lb = threadIdx.x % kTileBlocks;
  const int64_t sb = static_cast<int64_t>(at.b) * kTileBlocks + lb;
  if (sb >= sh.sblocks) return;
  // A window unit writes its rank rows, a prefix unit one (all its kept rows hold the same value).
  int64_t row0;
  const int count = hla_unit_rows(sh, sb, row0);
  if constexpr (Quads && Vec == 4) {
    // The paper's rank and prefix units: 4 consecutive channels a thread (the tile's 64 in one step), the rows in
    // the same sample-block as below.
    static_assert(kCols == 4 * kStep, "a thread's 4 channels cover the tile");
    if (count == 8 || count == 1) {
      const int64_t c = static_cast<int64_t>(at.c) * kCols + 4 * (threadIdx.x / kTileBlocks);
      if (c >= sh.channels) return;  // C % 4 == 0 (4 channels a thread): c..c+3 all inside
      Scale sc[4] = {sc_tensor, sc_tensor, sc_tensor, sc_tensor};
      if (per_channel) {
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const float s = absmax_to_scale(__uint_as_float(amax_bits[c + i]), qmax);
          if (sb == 0) scale[c + i] = s;
          sc[i] = scale_of(s);
        }
      }
      const float* src = tile + lb * HlaTile<Vec>::kStride + 4 * (threadIdx.x / kTileBlocks);
      const uint32_t index = static_cast<uint32_t>(row0) * channels + static_cast<uint32_t>(c);
      int8_t* const out = codes_t + c * sh.codes_pitch + row0;
      if (count == 8) {
        hla_quantize_quad<8, Stochastic, kCols>(src, sc, index, channels, key, qmax, out, sh.codes_pitch);
      } else {
        hla_quantize_quad<1, Stochastic, kCols>(src, sc, index, channels, key, qmax, out, sh.codes_pitch);
      }
      return;
    }
  }
  for (int lc = threadIdx.x / kTileBlocks; lc < kCols; lc += kStep) {
    const int64_t c = static_cast<int64_t>(at.c) * kCols + lc;
    if (c >= sh.channels) break;  // c grows with lc
    Scale sc = sc_tensor;
    if (per_channel) {
      const float s = absmax_to_scale(__uint_as_float(amax_bits[c]), qmax);
      if (sb == 0) scale[c] = s;
      sc = scale_of(s);
    }
    const float* src = tile + lb * HlaTile<Vec>::kStride + lc;
    // u is drawn at the element's row-major index in the projected (proj_rows x C) tensor, mod 2^32 (all the
    // hash reads).
    const uint32_t index = static_cast<uint32_t>(row0) * channels + static_cast<uint32_t>(c);
    int8_t* const out = codes_t + c * sh.codes_pitch + row0;
    if (count == 1) {
      hla_quantize_unit<1, true, Stochastic, kCols>(src, count, sc, index, channels, key, qmax, out);
    } else if (count == 8) {  // the paper's rank
      hla_quantize_unit<8, true, Stochastic, kCols>(src, count, sc, index, channels, key, qmax, out);
    } else {
      hla_quantize_unit<kHla, false, Stochastic, kCols>(src, count, sc, index, channels, key, qmax, out);
    }
  }
}

constexpr int kSumRows = 16;  // threads adding a column's partials, each every 16th

// out[c0 + j] for the kCols columns from c0 (those below `channels`): the sum of partials[0..tiles) of the column
// (tiles x C), in tile order: each of kSumRows threads adds every kSumRows-th tile, then one thread adds their totals
// in thread order (a fixed order: the same bits on every run and in both callers). part: kSumRows * kCols floats of
// shared memory; any block of at least kCols threads.
template <int kCols>
__device__ void column_sums_of(const float* __restrict__ partials, int64_t tiles, int64_t channels, int64_t c0,
                               float* part, float* __restrict__ out) {
  for (int p = threadIdx.x; p < kSumRows * kCols; p += blockDim.x) {
    const int y = p / kCols, j = p % kCols;
    const int64_t c = c0 + j;
    float s = 0.0f;
    if (c < channels) {
      for (int64_t t = y; t < tiles; t += kSumRows) s = __fadd_rn(s, partials[t * channels + c]);
    }
    part[y * kCols + j] = s;
  }
  __syncthreads();
  if (threadIdx.x < kCols && c0 + threadIdx.x < channels) {
    float total = part[threadIdx.x];
#pragma unroll
    for (int y = 1; y < kSumRows; ++y) total = __fadd_rn(total, part[y * kCols + threadIdx.x]);
    out[c0 + threadIdx.x] = total;
  }
}

// Phase 1 transforms the tile's units and parks their kept rows; phase 2 quantises them. Where column sums were asked
// for, the first row of tiles (tile_b = 0) then adds the amax pass's tile partials of its channels, reusing the tile's
// shared memory: no finishing kernel between the passes.
template <typename T, int Vec, bool Stochastic, bool Paper>
__global__ void __launch_bounds__(kHlaThreads)
    hla_quantize_kernel(const T* __restrict__ t, HlaShape sh, HlaRows rows, int qmax, bool per_channel,
                        HashKey hash, const uint32_t* __restrict__ amax_bits, int8_t* __restrict__ codes_t,
                        float* __restrict__ scale, ColumnSums sums) {
  static_assert(kSumRows * HlaTile<Vec>::kCols <= HlaTile<Vec>::kFloats, "the sums' slices fit in the tile");
  __shared__ __align__(16) float tile[HlaTile<Vec>::kFloats];
  const Dither key = Stochastic ? resolve_key(hash) : Dither{0u, 2u};  // first: the step's load overlaps the tile's
  {
    int64_t sb, c;
    hla_unit(sh, Vec, blockIdx.x, sb, c);
    if (sb >= 0) {
      float v[Vec][kHla];
      hla_load<T, Vec>(t, sh, sb, c, v);
      hla_park<Vec>(tile, kept_rows<Paper>(rows), v);
    }
  }
  __syncthreads();
  hla_store<Vec, Stochastic, true>(tile, sh, qmax, per_channel, key, amax_bits, codes_t, scale, blockIdx.x);
  if (sums.out != nullptr && blockIdx.x < sh.tiles_c) {  // block-uniform: tile_b = 0
    __syncthreads();  // the tile is read by phase 2 until here
    const int64_t tiles_b = (sh.sblocks + kTileBlocks - 1) / kTileBlocks;
    column_sums_of<HlaTile<Vec>::kCols>(sums.partials, tiles_b, sh.channels, blockIdx.x * HlaTile<Vec>::kCols, tile,
                                        sums.out);
  }
}

constexpr int kMaxDevices = 64;
std::atomic<bool> hla_one_launch_enabled{true};
std::atomic<bool> hla_rolled_transform_enabled{true};

// How many CTAs of `kernel` (`threads` threads, static shared memory) the current device holds at once, 0 where it
// takes no cooperative launch: found once a device and kernel (a template on the kernel itself, not its type: the
// stochastic and nearest kernels share a signature, not their registers).
template <auto kernel>
int64_t resident_ctas(int threads) {
  static std::atomic<int64_t> known[kMaxDevices];  // the count + 1, 0 until found
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= kMaxDevices) {
    (void)cudaGetLastError();
    return 0;
  }
  const int64_t k = known[device].load(std::memory_order_relaxed);
  if (k > 0) return k - 1;
  int cooperative = 0, sms = 0, per_sm = 0;
  if (cudaDeviceGetAttribute(&cooperative, cudaDevAttrCooperativeLaunch, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess ||
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, 0) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  const int64_t ctas = cooperative != 0 ? static_cast<int64_t>(sms) * per_sm : 0;
  known[device].store(ctas + 1, std::memory_order_relaxed);
  return ctas;
}

// A cooperative launch. Its error is returned and left for the caller's launch check (cudaGetLastError), as a
// <<<>>> launch's is.
template <typename... Params, typename... Args>
cudaError_t launch_cooperative(void (*kernel)(Params...), unsigned ctas, int threads, cudaStream_t stream,
                               Args... args) {
  static_assert(sizeof...(Params) == sizeof...(Args), "one argument a parameter");
  std::tuple<Params...> values{static_cast<Params>(args)...};
  void* pointers[sizeof...(Params)];
  std::apply([&](auto&... v) {
    int i = 0;
    ((pointers[i++] = static_cast<void*>(&v)), ...);
  }, values);
  return cudaLaunchCooperativeKernel(reinterpret_cast<const void*>(kernel), dim3(ctas), dim3(threads), pointers, 0,
                                     stream);
}

// The quantiser in one launch, where every tile of t fits on the GPU at once (a cooperative launch keeps all CTAs
// resident): each CTA transforms its tile once, parks the kept rows as hla_quantize_kernel does and takes the tile's
// amax (and column partials) as hla_amax does, publishes its amax in block_amax[blockIdx.x], and after a grid-wide
// barrier reads the tensor's amax from all the CTAs' (a max: the same bits in any order). One launch and one read
// of t in place of a memset, hla_amax's read and a second launch: the fixed cost that bounds a small layer.
// Per-tensor scale only.
template <typename T>
struct HlaOneLaunchArgs {  // one tensor's
  const T* t;
  HlaShape sh;
  HlaRows rows;
  int qmax;
  HashKey hash;
  uint32_t* block_amax;  // one word a CTA
  int8_t* codes_t;
  float* scale;
  ColumnSums sums;
};

// Phase 1 of a unit with one copy of the transform's code for its Vec channels: the raw slots are staged in the
// thread's own place of the tile (slot k at tile row k), then a loop that is not unrolled transforms one channel at a
// time and parks its kept rows in place (row k at tile row rows.slot[k] <= k, after all 16 are read), taking the amax
// and the unit sum on the way. The same arithmetic as hla_load + hla_park, so the same bits. Where a small tensor's
// CTAs run one to an SM and the unrolled code runs once, the SM stalls on instruction fetch (ncu's source counters on
// the latency figure's pair launch, h200_2026-11-29_s19); a loop's body is fetched once for the Vec channels.
template <typename T, int Vec>
__device__ __forceinline__ void hla_transform_parked(const T* __restrict__ t, const HlaShape& sh, int64_t sb,
                                                     int64_t c, const HlaRows& rows, float* tile, float& m,
                                                     float (&unit_sum)[Vec]) {
  constexpr int kCols = HlaTile<Vec>::kCols;
  const HlaUnit u = hla_unit_at(sh, sb);
  const bool prefix = sb >= sh.window_units;
  float* dst = tile + (threadIdx.x / kTileGroups) * HlaTile<Vec>::kStride + (threadIdx.x % kTileGroups) * Vec;
  {
    float v[Vec][kHla];
    hla_load_raw<T, Vec>(t, sh, u, c, v);
#pragma unroll
    for (int k = 0; k < kHla; ++k) {
      if constexpr (Vec == 4) {
        *reinterpret_cast<float4*>(dst + k * kCols) = make_float4(v[0][k], v[1][k], v[2][k], v[3][k]);
      } else {
#pragma unroll
        for (int i = 0; i < Vec; ++i) dst[k * kCols + i] = v[i][k];
      }
    }
  }
#pragma unroll 1
  for (int i = 0; i < Vec; ++i) {
    float w[kHla];
#pragma unroll
    for (int k = 0; k < kHla; ++k) w[k] = dst[k * kCols + i];
    hla_transform_channel(u.prefix, w);
    const float sum = prefix ? __fmul_rn(w[0], 0.25f) : w[0];
#pragma unroll
    for (int j = 0; j < Vec; ++j) unit_sum[j] = j == i ? sum : unit_sum[j];  // registers, not a local array
#pragma unroll
    for (int k = 0; k < kHla; ++k) {
      if (rows.mask >> k & 1u) {
        m = amax_of(m, fabsf(w[k]));
        dst[rows.slot[k] * kCols + i] = w[k];
      }
    }
  }
}

// The quantiser's work for tile `block` of the `blocks` tiles of p.t, the grid-wide barrier included (Rolled: phase
// 1 by hla_transform_parked).
template <typename T, int Vec, bool Stochastic, bool Rolled>
__device__ __forceinline__ void hla_one_launch_block(const HlaOneLaunchArgs<T>& p, unsigned block, unsigned blocks,
                                                     float* tile, uint32_t& tensor_amax) {
  const HlaShape& sh = p.sh;
  const Dither key = Stochastic ? resolve_key(p.hash) : Dither{0u, 2u};
  float m = 0.0f;
  float unit_sum[Vec] = {};
  {
    int64_t sb, c;
    hla_unit(sh, Vec, block, sb, c);
    if constexpr (Rolled) {
      if (sb >= 0) hla_transform_parked<T, Vec>(p.t, sh, sb, c, p.rows, tile, m, unit_sum);
    } else if (sb >= 0) {
      float v[Vec][kHla];
      hla_load<T, Vec>(p.t, sh, sb, c, v);
      const bool prefix = sb >= sh.window_units;
#pragma unroll
      for (int i = 0; i < Vec; ++i) {
        unit_sum[i] = prefix ? __fmul_rn(v[i][0], 0.25f) : v[i][0];
#pragma unroll
        for (int k = 0; k < kHla; ++k) {
          if (p.rows.mask >> k & 1u) m = amax_of(m, fabsf(v[i][k]));
        }
      }
      hla_park<Vec>(tile, p.rows, v);
    }
  }
  if (p.sums.partials != nullptr) hla_tile_column_sums<Vec>(sh, unit_sum, p.sums.partials, block);
  m = block_max(m);
  if (threadIdx.x == 0) p.block_amax[block] = __float_as_uint(m);
  cooperative_groups::this_grid().sync();  // a fence too: every CTA's amax and column partials are visible
  float a = 0.0f;
  for (unsigned b = threadIdx.x; b < blocks; b += blockDim.x) a = amax_of(a, __uint_as_float(__ldcg(p.block_amax + b)));
  a = block_max(a);
  if (threadIdx.x == 0) tensor_amax = __float_as_uint(a);
  __syncthreads();
  hla_store<Vec, Stochastic, false>(tile, sh, p.qmax, false, key, &tensor_amax, p.codes_t, p.scale, block);
  if (p.sums.out != nullptr && block < sh.tiles_c) {  // block-uniform: tile_b = 0
    __syncthreads();  // the tile is read by hla_store until here
    const int64_t tiles_b = (sh.sblocks + kTileBlocks - 1) / kTileBlocks;
    column_sums_of<HlaTile<Vec>::kCols>(p.sums.partials, tiles_b, sh.channels, block * HlaTile<Vec>::kCols, tile,
                                        p.sums.out);
  }
}

template <typename T, int Vec, bool Stochastic, bool Rolled>
__global__ void __launch_bounds__(kHlaThreads) hla_quantize_one_launch(HlaOneLaunchArgs<T> p) {
  __shared__ __align__(16) float tile[HlaTile<Vec>::kFloats];
  __shared__ uint32_t tensor_amax;
  hla_one_launch_block<T, Vec, Stochastic, Rolled>(p, blockIdx.x, gridDim.x, tile, tensor_amax);
}

// Two tensors' quantisers in one cooperative launch: CTAs [0, tiles_a) quantise a, the others b, one barrier for
// all. In a backward that makes x's codes, x's and g_y's quantisers are then one node of the captured graph, with
// the g_w GEMM after it on the same stream: no third stream to fork, no wait across streams before the GEMM.
template <typename T, int Vec, bool StochasticA, bool StochasticB, bool Rolled>
__global__ void __launch_bounds__(kHlaThreads)
    hla_quantize_pair_one_launch(HlaOneLaunchArgs<T> a, unsigned tiles_a, HlaOneLaunchArgs<T> b) {
  __shared__ __align__(16) float tile[HlaTile<Vec>::kFloats];
  __shared__ uint32_t tensor_amax;
  if (blockIdx.x < tiles_a) {
    hla_one_launch_block<T, Vec, StochasticA, Rolled>(a, blockIdx.x, tiles_a, tile, tensor_amax);
  } else {
    hla_one_launch_block<T, Vec, StochasticB, Rolled>(b, blockIdx.x - tiles_a, gridDim.x - tiles_a, tile,
                                                      tensor_amax);
  }
}

// f(kernel) for hla_quantize_one_launch<T, Vec, stochastic, rolled> as a compile-time constant (resident_ctas takes
// its kernel as a template argument); rolled where set_hla_rolled_transform has it (a unit of 4 channels).
template <typename T, int Vec, typename F>
decltype(auto) with_one_launch_kernel(bool stochastic, F&& f) {
  using Kernel = void (*)(HlaOneLaunchArgs<T>);
  if constexpr (Vec > 1) {  // a unit of one channel has nothing to roll
    if (hla_rolled_transform_enabled.load(std::memory_order_relaxed)) {
      if (stochastic) return f(std::integral_constant<Kernel, &hla_quantize_one_launch<T, Vec, true, true>>{});
      return f(std::integral_constant<Kernel, &hla_quantize_one_launch<T, Vec, false, true>>{});
    }
  }
  if (stochastic) return f(std::integral_constant<Kernel, &hla_quantize_one_launch<T, Vec, true, false>>{});
  return f(std::integral_constant<Kernel, &hla_quantize_one_launch<T, Vec, false, false>>{});
}

// Whether hla_quantize runs hla_quantize_one_launch for t's shape (per-tensor scale, every tile resident).
template <typename T, int Vec>
bool hla_takes_one_launch(unsigned tiles, bool per_channel, bool stochastic) {
  if (per_channel || !hla_one_launch_enabled.load(std::memory_order_relaxed)) return false;
  return with_one_launch_kernel<T, Vec>(
      stochastic, [&](auto kernel) { return tiles <= resident_ctas<decltype(kernel)::value>(kHlaThreads); });
}

constexpr int kSumCols = 32;  // column_sums_finish: columns per block

// The column sums of the fused g_y quantiser's statistics pass, 32 columns a block.
__global__ void column_sums_finish(const float* __restrict__ partials, int64_t tiles, int64_t channels,
                                   float* __restrict__ out) {
  __shared__ float part[kSumRows * kSumCols];
  column_sums_of<kSumCols>(partials, tiles, channels, blockIdx.x * static_cast<int64_t>(kSumCols), part, out);
}

// The sums' finish, where sums were asked for (their tile partials written by the amax pass).
void launch_column_sums_finish(const ColumnSums& sums, int64_t tiles, int64_t channels, cudaStream_t stream) {
  if (sums.out == nullptr) return;
  const auto blocks = static_cast<unsigned>((channels + kSumCols - 1) / kSumCols);
  column_sums_finish<<<blocks, kSumRows * kSumCols, 0, stream>>>(sums.partials, tiles, channels, sums.out);
}

template <typename T, int Vec>
void launch_hla_vec(const T* t, HlaShape sh, const HlaRows& rows, int qmax, bool per_channel, bool stochastic,
                    HashKey key, int8_t* codes_t, float* scale, uint32_t* amax_bits, bool one_launch,
                    const ColumnSums& sums, cudaStream_t stream) {
  hla_set_tiles(sh, HlaTile<Vec>::kCols);
  const int64_t tiles_b = (sh.sblocks + kTileBlocks - 1) / kTileBlocks, tiles = sh.tiles_c * tiles_b;
  if (one_launch) {
    const auto ctas = static_cast<unsigned>(tiles);
    const HlaOneLaunchArgs<T> args{t, sh, rows, qmax, key, amax_bits, codes_t, scale, sums};
    const cudaError_t launched = with_one_launch_kernel<T, Vec>(stochastic, [&](auto kernel) {
      return launch_cooperative(decltype(kernel)::value, ctas, kHlaThreads, stream, args);
    });
    if (launched != cudaErrorCooperativeLaunchTooLarge) return;
    // Fewer SMs than the device reports (MPS, a partitioned context): the two passes, on a zeroed amax word.
    (void)cudaGetLastError();
    if (cudaMemsetAsync(amax_bits, 0, sizeof(uint32_t), stream) != cudaSuccess) return;
  }
  // The paper's rows take kernels compiled for them (4 channels a thread: the 16-bit g_y and x of the models)
  const auto passes = [&](auto paper) {
    constexpr bool kPaper = decltype(paper)::value;
    hla_amax<T, Vec, kPaper><<<static_cast<unsigned>(tiles), kHlaThreads, 0, stream>>>(t, sh, rows, per_channel,
                                                                                      amax_bits, sums.partials);
    if (stochastic) {
      hla_quantize_kernel<T, Vec, true, kPaper><<<static_cast<unsigned>(tiles), kHlaThreads, 0, stream>>>(
          t, sh, rows, qmax, per_channel, key, amax_bits, codes_t, scale, sums);
    } else {
      hla_quantize_kernel<T, Vec, false, kPaper><<<static_cast<unsigned>(tiles), kHlaThreads, 0, stream>>>(
          t, sh, rows, qmax, per_channel, key, amax_bits, codes_t, scale, sums);
    }
  };
  if constexpr (Vec == 4) {
    if (is_paper_rows(rows)) {
      passes(std::true_type{});
      return;
    }
  }
  passes(std::false_type{});
}

template <typename T>
void launch_hla(const T* t, const HlaShape& sh, const HlaRows& rows, int qmax, bool per_channel, bool stochastic,
                HashKey key, int8_t* codes_t, float* scale, uint32_t* amax_bits, bool one_launch,
                const ColumnSums& sums, cudaStream_t stream) {
  // Vector loads need every row start aligned to 4 elements.
  if (sh.channels % 4 == 0) {
    launch_hla_vec<T, 4>(t, sh, rows, qmax, per_channel, stochastic, key, codes_t, scale, amax_bits, one_launch, sums,
                         stream);
  } else {
    launch_hla_vec<T, 1>(t, sh, rows, qmax, per_channel, stochastic, key, codes_t, scale, amax_bits, one_launch, sums,
                         stream);
  }
}

// --- LBP-WHT in floating point: P t and Pᵀ p / 16 along tokens, one pass each ---------------------------------
// The latency figure's LBP-WHT column: the projection hla_quantize runs, without its amax pass or its codes.

// P t as hla_project lays it out (R x C float32, row-major): a thread transforms one unit's Vec channels and stores
// its kept rows from registers (the tile's 16 channel groups write 16 x Vec contiguous floats of a row).
template <typename T, int Vec>
__global__ void __launch_bounds__(kHlaThreads)
    hla_project_kernel(const T* __restrict__ t, HlaShape sh, HlaRows rows, float* __restrict__ out) {
  int64_t sb, c;
  hla_unit(sh, Vec, blockIdx.x, sb, c);
  if (sb < 0) return;
  float v[Vec][kHla];
  hla_load<T, Vec>(t, sh, sb, c, v);
  int64_t row0;
  const int count = hla_unit_rows(sh, sb, row0);  // a prefix unit's one row: any kept row (all hold 4 x its token)
#pragma unroll
  for (int k = 0; k < kHla; ++k) {
    if (!(rows.mask >> k & 1u) || rows.slot[k] >= count) continue;
    float* dst = out + (row0 + rows.slot[k]) * sh.channels + c;
    if constexpr (Vec == 4) {
      *reinterpret_cast<float4*>(dst) = make_float4(v[0][k], v[1][k], v[2][k], v[3][k]);
    } else {
      dst[0] = v[0][k];
    }
  }
}

// Pᵀ p / 16 back at each window's positions, prefix rows / 4 (hla_unproject; L x C float32): a thread gathers one
// unit's kept rows for Vec channels, applies H_16 (symmetric, so Hᵀ = H) and stores the slots inside the sample.
// Every token belongs to one unit, so every output element is written.
template <int Vec>
__global__ void __launch_bounds__(kHlaThreads)
    hla_unproject_kernel(const float* __restrict__ p, HlaShape sh, HlaRows rows, float* __restrict__ out) {
  int64_t sb, c;
  hla_unit(sh, Vec, blockIdx.x, sb, c);
  if (sb < 0) return;
  const HlaUnit u = hla_unit_at(sh, sb);
  int64_t row0;
  const int count = hla_unit_rows(sh, sb, row0);
  float* first = out + u.first * sh.channels + c;
  if (u.prefix) {
    float e[Vec];
    load_contiguous<float, Vec>(p + row0 * sh.channels + c, e);
#pragma unroll
    for (int i = 0; i < Vec; ++i) first[i] = __fmul_rn(e[i], 0.25f);  // / 4: exact
    return;
  }
  float v[Vec][kHla];
#pragma unroll
  for (int k = 0; k < kHla; ++k) {
    const bool kept = (rows.mask >> k & 1u) && rows.slot[k] < count;
    float e[Vec];
    load_contiguous<float, Vec>(p + (row0 + (kept ? rows.slot[k] : 0)) * sh.channels + c, e);
#pragma unroll
    for (int i = 0; i < Vec; ++i) v[i][k] = kept ? e[i] : 0.0f;
  }
#pragma unroll
  for (int i = 0; i < Vec; ++i) butterfly<kHla>(v[i]);
  const HlaSlots slots = hla_slots(sh, u, static_cast<uint32_t>(sh.channels));
#pragma unroll
  for (int k = 0; k < kHla; ++k) {
    uint32_t offset;
    if (!hla_slot(slots, k, offset)) continue;
    if constexpr (Vec == 4) {
      *reinterpret_cast<float4*>(first + offset) = make_float4(
          __fmul_rn(v[0][k], 0.0625f), __fmul_rn(v[1][k], 0.0625f), __fmul_rn(v[2][k], 0.0625f),
          __fmul_rn(v[3][k], 0.0625f));  // / 16: exact
    } else {
      first[offset] = __fmul_rn(v[0][k], 0.0625f);
    }
  }
}

// The grid of hla_unit's tiles for Vec channels a thread (sets sh.tiles_c).
template <int Vec>
unsigned hla_tiles(HlaShape& sh) {
  hla_set_tiles(sh, HlaTile<Vec>::kCols);
  return static_cast<unsigned>(sh.tiles_c * ((sh.sblocks + kTileBlocks - 1) / kTileBlocks));
}

// --- g_y for both GEMMs: Q(HT(g_y)) along O and Q(P g_y) along L in two passes -----------------------
// Both passes walk the HLA tile (a thread: 16 rows of one sample-block x 4 channels). HT along O runs on
// each row: stages h = 1, 2 inside the thread's 4 channels, h = 4, 8 across the lanes that hold the next
// channel groups (lane ^ 1, lane ^ 2), the reference's (a + b, a - b) pairs in its order. Pass 1 takes the
// amaxes (HQ per token or tensor, HLA per tensor or channel), pass 2 quantises both. g_y is read twice and
// nothing else is: a per-tensor scale needs every element before the first code.

constexpr int kHqVec = 4;

template <int N>
__device__ __forceinline__ void hq_row(float (&r)[kHqVec], int group) {
  if constexpr (N >= 2) {
#pragma unroll
    for (int i = 0; i < kHqVec; i += 2) {
      const float a = r[i], b = r[i + 1];
      r[i] = __fadd_rn(a, b);
      r[i + 1] = __fsub_rn(a, b);
    }
  }
  if constexpr (N >= 4) {
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const float a = r[i], b = r[i + 2];
      r[i] = __fadd_rn(a, b);
      r[i + 2] = __fsub_rn(a, b);
    }
  }
#pragma unroll
  for (int m = 1; m < N / kHqVec; m *= 2) {
    const bool upper = group & m;
#pragma unroll
    for (int i = 0; i < kHqVec; ++i) {
      const float p = __shfl_xor_sync(0xffffffffu, r[i], m);
      r[i] = upper ? __fsub_rn(p, r[i]) : __fadd_rn(r[i], p);
    }
  }
}

// This thread's unit (an empty one, no slot inside, when inactive).
__device__ __forceinline__ HlaUnit grad_output_unit(const HlaShape& sh, int64_t sb) {
  return sb >= 0 ? hla_unit_at(sh, sb) : HlaUnit{0, 0, 0, false};
}

template <typename T>
__device__ __forceinline__ void grad_output_load(const T* __restrict__ g, const HlaShape& sh, const HlaUnit& u,
                                                 int64_t sb, int64_t c, float (&v)[kHqVec][kHla]) {
  if (sb >= 0) {
    hla_load_raw<T, kHqVec>(g, sh, u, c, v);
  } else {
#pragma unroll
    for (int i = 0; i < kHqVec; ++i) {
#pragma unroll
      for (int k = 0; k < kHla; ++k) v[i][k] = 0.0f;
    }
  }
}

template <typename T, int N>
__global__ void __launch_bounds__(kHlaThreads)
    grad_output_amax(const T* __restrict__ g, HlaShape sh, unsigned mask, GradOutputQuant q) {
  int64_t sb, c;
  hla_unit(sh, kHqVec, blockIdx.x, sb, c);
  const HlaUnit u = grad_output_unit(sh, sb);
  float v[kHqVec][kHla];
  grad_output_load<T>(g, sh, u, sb, c, v);
  const int group = threadIdx.x % kTileGroups;
  uint32_t* const hq_amax = q.hq_amax + u.first;  // per token: the unit's rows at 32-bit offsets
  const HlaSlots tokens = hla_slots(sh, u, 1u);
  float hq_tensor = 0.0f;
#pragma unroll
  for (int k = 0; k < kHla; ++k) {
    float r[kHqVec] = {v[0][k], v[1][k], v[2][k], v[3][k]};
    hq_row<N>(r, group);
    float m = amax_of(amax_of(fabsf(r[0]), fabsf(r[1])), amax_of(fabsf(r[2]), fabsf(r[3])));
    if (q.hq_per_token) {
#pragma unroll
      for (int o = 1; o < kTileGroups; o *= 2) m = amax_of(m, __shfl_xor_sync(0xffffffffu, m, o));
      uint32_t token;
      if (group == 0 && hla_slot(tokens, k, token)) atomicMax(hq_amax + token, __float_as_uint(m));
    } else {
      hq_tensor = amax_of(hq_tensor, m);
    }
  }
  hla_transform<kHqVec>(u, v);
  if (q.sums.partials != nullptr) {
    float unit_sum[kHqVec];
#pragma unroll
    for (int i = 0; i < kHqVec; ++i) unit_sum[i] = u.prefix ? __fmul_rn(v[i][0], 0.25f) : v[i][0];
    hla_tile_column_sums<kHqVec>(sh, unit_sum, q.sums.partials, blockIdx.x);
  }
  float m[kHqVec] = {};
#pragma unroll
  for (int i = 0; i < kHqVec; ++i) {
#pragma unroll
    for (int k = 0; k < kHla; ++k) {
      if (mask >> k & 1u) m[i] = amax_of(m[i], fabsf(v[i][k]));
    }
  }
  if (q.hla_per_channel) {
#pragma unroll
    for (int i = 0; i < kHqVec; ++i) {
      m[i] = amax_of(m[i], __shfl_xor_sync(0xffffffffu, m[i], kTileGroups));
      if (sb >= 0 && threadIdx.x % 32 < kTileGroups && __float_as_uint(m[i]) != 0u) {
        atomicMax(q.hla_amax + c + i, __float_as_uint(m[i]));
      }
    }
  } else {
    const float a = block_max(amax_of(amax_of(m[0], m[1]), amax_of(m[2], m[3])));
    if (threadIdx.x == 0) atomicMax(q.hla_amax, __float_as_uint(a));  // non-negative floats order as uints
  }
  if (!q.hq_per_token) {
    hq_tensor = block_max(hq_tensor);
    if (threadIdx.x == 0) atomicMax(q.hq_amax, __float_as_uint(hq_tensor));
  }
}

template <typename T, int N>
__global__ void __launch_bounds__(kHlaThreads)
    grad_output_quantize(const T* __restrict__ g, HlaShape sh, HlaRows rows, GradOutputQuant q) {
  __shared__ __align__(16) float tile[HlaTile<kHqVec>::kFloats];
  const Dither hq_key = resolve_key(q.hq_key), hla_key = q.hla_stochastic ? resolve_key(q.hla_key) : Dither{0u, 2u};
  int64_t sb, c;
  hla_unit(sh, kHqVec, blockIdx.x, sb, c);
  const HlaUnit u = grad_output_unit(sh, sb);
  float v[kHqVec][kHla];
  grad_output_load<T>(g, sh, u, sb, c, v);
  const int group = threadIdx.x % kTileGroups;
  const float s_tensor = q.hq_per_token ? 0.0f : absmax_to_scale(__uint_as_float(*q.hq_amax), q.hq_qmax);
  if (!q.hq_per_token && blockIdx.x == 0 && threadIdx.x == 0) *q.hq_scale = s_tensor;
  const bool writes_scale = q.hq_per_token && group == 0 && hla_tile_at(sh, blockIdx.x).c == 0u;
  // The unit's slots at 32-bit offsets: rows of the per-token arrays, elements of the codes (and of the hash's
  // index, which it reads mod 2^32).
  const uint32_t* const hq_amax = q.hq_amax + u.first;
  float* const hq_scale = q.hq_scale + u.first;
  const int64_t first = u.first * sh.channels + c;
  int8_t* const hq_codes = q.hq_codes + first;
  const uint32_t index = static_cast<uint32_t>(first);
  const HlaSlots tokens = hla_slots(sh, u, 1u), elements = hla_slots(sh, u, static_cast<uint32_t>(sh.channels));
#pragma unroll
  for (int k = 0; k < kHla; ++k) {
    float r[kHqVec] = {v[0][k], v[1][k], v[2][k], v[3][k]};
    hq_row<N>(r, group);
    uint32_t token, offset;
    hla_slot(tokens, k, token);
    if (hla_slot(elements, k, offset)) {
      const float s = q.hq_per_token ? absmax_to_scale(__uint_as_float(hq_amax[token]), q.hq_qmax) : s_tensor;
      if (writes_scale) hq_scale[token] = s;
      const Scale sc = scale_of(s);
      hq_store_chunk<kHqVec>(r, sc, index + offset, hq_key, q.hq_qmax, q.fp8, hq_codes + offset);
    }
  }
  hla_transform<kHqVec>(u, v);
  if (sb >= 0) hla_park<kHqVec>(tile, rows, v);
  __syncthreads();
  if (q.hla_stochastic) {
    hla_store<kHqVec, true, true>(tile, sh, q.hla_qmax, q.hla_per_channel, hla_key, q.hla_amax, q.hla_codes_t,
                            q.hla_scale, blockIdx.x);
  } else {
    hla_store<kHqVec, false, true>(tile, sh, q.hla_qmax, q.hla_per_channel, Dither{0u, 2u}, q.hla_amax, q.hla_codes_t,
                             q.hla_scale, blockIdx.x);
  }
}

template <typename T, int N>
void launch_grad_output(const T* g, HlaShape sh, const HlaRows& rows, const GradOutputQuant& q, cudaStream_t stream) {
  hla_set_tiles(sh, HlaTile<kHqVec>::kCols);
  const int64_t tiles_b = (sh.sblocks + kTileBlocks - 1) / kTileBlocks;
  const auto tiles = static_cast<unsigned>(sh.tiles_c * tiles_b);
  grad_output_amax<T, N><<<tiles, kHlaThreads, 0, stream>>>(g, sh, rows.mask, q);
  launch_column_sums_finish(q.sums, tiles_b, sh.channels, stream);
  grad_output_quantize<T, N><<<tiles, kHlaThreads, 0, stream>>>(g, sh, rows, q);
}


// --- dequantisation and format conversions ---------------------------------------------------------

template <typename Acc>
__device__ __forceinline__ float dequantize_one(Acc acc, float row, const float* col, bool col_vec, int64_t c,
                                                float divisor) {
  return __fmul_rn(__fmul_rn(static_cast<float>(acc), row), __fdiv_rn(col[col_vec ? c : 0], divisor));
}

// Rows over gridDim.y, 4 columns a thread (one 16-byte load and store when vec: n % 4 == 0 and acc
// aligned): no per-element
// 64-bit division, full-width memory transactions.
template <typename Acc>
__global__ void dequantize_kernel(const Acc* __restrict__ acc, int64_t m, int64_t n, const float* __restrict__ row,
                                  bool row_vec, const float* __restrict__ col, bool col_vec, float divisor,
                                  bool vec, float* __restrict__ out) {
  for (int64_t r = blockIdx.y; r < m; r += gridDim.y) {
    const float rs = row[row_vec ? r : 0];
    const Acc* a = acc + r * n;
    float* o = out + r * n;
    for (int64_t c = 4 * (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x); c < n;
         c += 4 * static_cast<int64_t>(gridDim.x) * blockDim.x) {
      if (vec) {
        using V = typename VecOf<4 * sizeof(Acc)>::type;
        const V raw = *reinterpret_cast<const V*>(a + c);
        const Acc* e = reinterpret_cast<const Acc*>(&raw);
        *reinterpret_cast<float4*>(o + c) =
            make_float4(dequantize_one(e[0], rs, col, col_vec, c, divisor),
                        dequantize_one(e[1], rs, col, col_vec, c + 1, divisor),
                        dequantize_one(e[2], rs, col, col_vec, c + 2, divisor),
                        dequantize_one(e[3], rs, col, col_vec, c + 3, divisor));
      } else {
        for (int64_t k = c; k < c + 4 && k < n; ++k) o[k] = dequantize_one(a[k], rs, col, col_vec, k, divisor);
      }
    }
  }
}

// A HOT layer's forward: the step it uses, and the counter moved on (one thread).
__global__ void advance_step_kernel(int64_t* step, int64_t* saved) {
  const int64_t s = *step;
  *saved = s;
  *step = s + 1;
}

// hot.rounding.uniform, four numbers a thread with one 16-byte store (out comes from torch's allocator: aligned).
__global__ void hash_uniform_kernel(float* __restrict__ out, int64_t n, HashKey hash) {
  const Dither key = resolve_key(hash);
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x * 4;
  for (int64_t i = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) * 4; i < n; i += step) {
    const uint32_t e = static_cast<uint32_t>(i);  // the hash reads its index mod 2^32
    if (i + 4 <= n) {
      *reinterpret_cast<float4*>(out + i) = make_float4(hash_uniform(e, key), hash_uniform(e + 1, key),
                                                        hash_uniform(e + 2, key), hash_uniform(e + 3, key));
    } else {
      for (int64_t k = i; k < n; ++k) out[k] = hash_uniform(static_cast<uint32_t>(k), key);
    }
  }
}

// 16 codes a thread, one 16-byte load and store, when nothing is padded and the rows are 16-byte aligned.
__global__ void codes_to_e4m3_vec_kernel(const uint4* __restrict__ in, int64_t chunks, uint4* __restrict__ out) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < chunks;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const uint4 raw = in[i];
    const int8_t* q = reinterpret_cast<const int8_t*>(&raw);
    uint4 f;
    uint8_t* b = reinterpret_cast<uint8_t*>(&f);
#pragma unroll
    for (int k = 0; k < 16; ++k) {
      b[k] = static_cast<uint8_t>(__nv_cvt_float_to_fp8(static_cast<float>(q[k]), __NV_SATFINITE, __NV_E4M3));
    }
    out[i] = f;
  }
}

__global__ void codes_to_e4m3_kernel(const int8_t* __restrict__ in, int64_t rows, int64_t cols, int64_t cols_pad,
                                     uint8_t* __restrict__ out) {
  const int64_t total = rows * cols_pad;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / cols_pad, c = i % cols_pad;
    const float v = c < cols ? static_cast<float>(in[r * cols + c]) : 0.0f;
    out[i] = static_cast<uint8_t>(__nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3));
  }
}

// out[i] = col[i] (or col[0], one number for all) * factor: W's scale over the block as the FP8 GEMM's column
// scale vector, in one launch.
__global__ void scale_columns_kernel(const float* __restrict__ col, bool col_vec, float factor, int64_t n,
                                     float* __restrict__ out) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    out[i] = __fmul_rn(col[col_vec ? i : 0], factor);
  }
}

// Two int8 matrices (rows x cols, rows a_pitch and b_pitch apart) copied with each row widened to cols_pad (a
// multiple of 16) and zeros after cols: a GEMM's two operands in one launch, one 16-byte store a thread.
__global__ void pad_columns_kernel(const int8_t* __restrict__ a, int64_t a_rows, int64_t a_pitch,
                                   int8_t* __restrict__ a_out, const int8_t* __restrict__ b, int64_t b_rows,
                                   int64_t b_pitch, int8_t* __restrict__ b_out, int64_t cols, int64_t cols_pad) {
  const int64_t chunks = cols_pad / 16, total = (a_rows + b_rows) * chunks;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t r = i / chunks;
    const int64_t c = i % chunks * 16;
    const int8_t* src = r < a_rows ? a : b;
    int8_t* dst = r < a_rows ? a_out : b_out;
    const int64_t pitch = r < a_rows ? a_pitch : b_pitch;
    if (r >= a_rows) r -= a_rows;
    src += r * pitch + c;
    alignas(16) int8_t v[16];
#pragma unroll
    for (int j = 0; j < 16; ++j) v[j] = c + j < cols ? src[j] : int8_t{0};
    *reinterpret_cast<uint4*>(dst + r * cols_pad + c) = *reinterpret_cast<const uint4*>(v);
  }
}

__global__ void pack_int4_kernel(const int8_t* __restrict__ in, int64_t rows, int64_t cols, int64_t cols_pad,
                                 uint8_t* __restrict__ out) {
  const int64_t half = cols_pad / 2, total = rows * half;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / half, c = 2 * (i % half);
    const int lo = c < cols ? in[r * cols + c] : 0;
    const int hi = c + 1 < cols ? in[r * cols + c + 1] : 0;
    out[i] = static_cast<uint8_t>((lo & 0xF) | ((hi & 0xF) << 4));
  }
}

template <typename P>
using element_of = std::remove_const_t<std::remove_pointer_t<P>>;

// f(const T*) with g's elements typed by `type`.
template <typename F>
void with_input_type(const void* g, InType type, F&& f) {
  switch (type) {
    case InType::F32: return f(static_cast<const float*>(g));
    case InType::F16: return f(static_cast<const __half*>(g));
    case InType::BF16: return f(static_cast<const __nv_bfloat16*>(g));
  }
}

}  // namespace

void hq_quantize_grad_output(const void* g_y, InType type, int64_t rows, int64_t cols, int block, int qmax,
                             bool per_token, HashKey key, bool fp8, int8_t* codes, float* scale, uint32_t* amax_bits,
                             cudaStream_t stream) {
  with_input_type(g_y, type, [&](auto g) {
    with_hadamard_block(block, [&](auto n) {
      launch_hq_grad_output<element_of<decltype(g)>, decltype(n)::value>(
          g, rows, cols, qmax, per_token, key, fp8, codes, scale, amax_bits, stream);
    });
  });
}

int sawb_partials_size() { return 3 * kSawbBlocks; }

int sawb_partials_used(int64_t out_rows, int64_t in_cols, int block) {
  return sawb_blocks_used(out_rows / block * in_cols);
}

void hq_quantize_weight(const void* w, InType type, int64_t out_rows, int64_t in_cols, int block, int qmax,
                        bool sawb4, bool fp8, int8_t* codes_t, float* scale, float* column_scales, double* partials,
                        cudaStream_t stream) {
  with_input_type(w, type, [&](auto p) {
    with_hadamard_block(block, [&](auto n) {
      launch_weight<element_of<decltype(p)>, decltype(n)::value>(
          p, out_rows, in_cols, qmax, sawb4, fp8, codes_t, scale, column_scales, partials, stream);
    });
  });
}

bool weight_and_grad_output_in_one_launch(int block, int64_t cols) {
  // hq_grad_output_per_token's rows: at most 4 chunks a thread, a row on whole warps of at most kThreads threads
  return block == 16 && cols >= 16 && cols / 16 <= 4 * kThreads;
}

bool hq_quantize_weight_and_grad_output(const WeightQuantizeCall& w, const void* g_y, InType g_type, int64_t rows,
                                        int64_t cols, HashKey key, bool g_fp8, int8_t* g_codes, float* g_scale,
                                        cudaStream_t stream) {
  if (!weight_and_grad_output_in_one_launch(w.block, cols)) return false;
  const int64_t chunks = cols / 16;
  const int per_thread = chunks <= kThreads ? 1 : (chunks <= 2 * kThreads ? 2 : 4);
  const int needed = static_cast<int>((chunks + per_thread - 1) / per_thread);  // threads a row takes
  int group = 1;  // the least power of two up to a warp that holds them, else whole warps (group_max's groups)
  while (group < needed && group < 32) group *= 2;
  if (needed > 32) group = (needed + 31) / 32 * 32;
  with_input_type(w.w, w.type, [&](auto pw) {
    with_input_type(g_y, g_type, [&](auto pg) {
      using TW = element_of<decltype(pw)>;
      using TG = element_of<decltype(pg)>;
      const auto launch = [&](auto chunks_a_thread) {
        launch_weight_and_grad_output<TW, TG, decltype(chunks_a_thread)::value>(
            pw, w.out_rows, w.in_cols, w.qmax, w.sawb4, w.fp8, w.codes_t, w.scale, w.column_scales, w.partials, pg,
            rows, cols, key, g_fp8, g_codes, g_scale, group, stream);
      };
      if (per_thread == 1) launch(std::integral_constant<int, 1>{});
      if (per_thread == 2) launch(std::integral_constant<int, 2>{});
      if (per_thread == 4) launch(std::integral_constant<int, 4>{});
    });
  });
  return true;
}

int64_t hla_projected_rows(int64_t length, const HlaWindows& windows, int rank) {
  return hla_shape(length, 1, windows, rank).proj_rows;
}

int64_t hla_column_partial_rows(int64_t length, const HlaWindows& windows) {
  return (hla_shape(length, 1, windows, 1).sblocks + kTileBlocks - 1) / kTileBlocks;
}

HlaScratch hla_quantize_scratch(InType type, int64_t length, int64_t channels, const HlaWindows& windows, int rank,
                                bool per_channel, bool stochastic) {
  HlaShape sh = hla_shape(length, channels, windows, rank);
  const bool vec4 = channels % 4 == 0;
  const unsigned tiles = vec4 ? hla_tiles<4>(sh) : hla_tiles<1>(sh);
  bool one_launch = false;
  with_input_type(static_cast<const void*>(nullptr), type, [&](auto p) {
    using T = element_of<decltype(p)>;
    one_launch = vec4 ? hla_takes_one_launch<T, 4>(tiles, per_channel, stochastic)
                      : hla_takes_one_launch<T, 1>(tiles, per_channel, stochastic);
  });
  if (one_launch) return {static_cast<int64_t>(tiles), false};
  return {per_channel ? channels : 1, true};
}

void set_hla_one_launch(bool enabled) { hla_one_launch_enabled.store(enabled, std::memory_order_relaxed); }

void set_hla_rolled_transform(bool enabled) {
  hla_rolled_transform_enabled.store(enabled, std::memory_order_relaxed);
}

void hla_quantize(const void* t, InType type, int64_t length, int64_t channels, const HlaWindows& windows,
                  const int* rows, int rank, int qmax, bool per_channel, bool stochastic, HashKey key, int8_t* codes_t,
                  float* scale, const HlaScratch& scratch, uint32_t* amax_bits, const ColumnSums& sums,
                  cudaStream_t stream) {
  const HlaRows kept = hla_rows(rows, rank);
  const HlaShape sh = hla_shape(length, channels, windows, rank);
  with_input_type(t, type, [&](auto p) {
    launch_hla(p, sh, kept, qmax, per_channel, stochastic, key, codes_t, scale, amax_bits, !scratch.zeroed, sums,
               stream);
  });
}

namespace {

// The pair kernel for inputs of type T, a's and b's roundings and phase 1's form, as a compile-time constant
// (resident_ctas takes its kernel as a template argument).
template <typename T, bool StochasticA, bool StochasticB, bool Rolled>
using PairKernel = std::integral_constant<void (*)(HlaOneLaunchArgs<T>, unsigned, HlaOneLaunchArgs<T>),
                                          &hla_quantize_pair_one_launch<T, 4, StochasticA, StochasticB, Rolled>>;

template <typename T, bool Rolled, typename F>
void with_pair_kernel_of(bool stochastic_a, bool stochastic_b, F&& f) {
  if (stochastic_a && stochastic_b) return f(PairKernel<T, true, true, Rolled>{});
  if (stochastic_a) return f(PairKernel<T, true, false, Rolled>{});
  if (stochastic_b) return f(PairKernel<T, false, true, Rolled>{});
  return f(PairKernel<T, false, false, Rolled>{});
}

// f(PairKernel<T, stochastic_a, stochastic_b, rolled>{}), rolled where set_hla_rolled_transform has it.
template <typename T, typename F>
void with_pair_kernel(bool stochastic_a, bool stochastic_b, F&& f) {
  if (hla_rolled_transform_enabled.load(std::memory_order_relaxed)) {
    return with_pair_kernel_of<T, true>(stochastic_a, stochastic_b, f);
  }
  with_pair_kernel_of<T, false>(stochastic_a, stochastic_b, f);
}

}  // namespace

bool hla_pair_in_one_launch(const HlaQuantizeCall& a, const HlaQuantizeCall& b) {
  if (a.type != b.type || a.channels % 4 != 0 || b.channels % 4 != 0 ||
      !hla_one_launch_enabled.load(std::memory_order_relaxed)) {
    return false;
  }
  HlaShape sa = hla_shape(a.length, a.channels, a.windows, a.rank), sb = hla_shape(b.length, b.channels, b.windows,
                                                                                  b.rank);
  const int64_t tiles = static_cast<int64_t>(hla_tiles<4>(sa)) + hla_tiles<4>(sb);
  int64_t resident = 0;
  with_input_type(a.t, a.type, [&](auto p) {
    with_pair_kernel<element_of<decltype(p)>>(a.stochastic, b.stochastic, [&](auto kernel) {
      resident = resident_ctas<decltype(kernel)::value>(kHlaThreads);
    });
  });
  return tiles <= resident;
}

bool hla_quantize_pair(const HlaQuantizeCall& a, const HlaQuantizeCall& b, cudaStream_t stream) {
  if (!hla_pair_in_one_launch(a, b)) return false;
  HlaShape sa = hla_shape(a.length, a.channels, a.windows, a.rank), sb = hla_shape(b.length, b.channels, b.windows,
                                                                                  b.rank);
  const unsigned tiles_a = hla_tiles<4>(sa), tiles_b = hla_tiles<4>(sb);  // sets tiles_c
  bool launched = false;
  with_input_type(a.t, a.type, [&](auto p) {
    using T = element_of<decltype(p)>;
    const HlaOneLaunchArgs<T> args_a{p, sa, hla_rows(a.rows, a.rank), a.qmax, a.key, a.amax_bits, a.codes_t, a.scale,
                                     a.sums};
    const HlaOneLaunchArgs<T> args_b{static_cast<const T*>(b.t), sb, hla_rows(b.rows, b.rank), b.qmax, b.key,
                                     b.amax_bits, b.codes_t, b.scale, b.sums};
    with_pair_kernel<T>(a.stochastic, b.stochastic, [&](auto kernel) {
      // fewer SMs than the device reports: the caller's two calls; another error is left for its launch check
      launched = launch_cooperative(decltype(kernel)::value, tiles_a + tiles_b, kHlaThreads, stream, args_a, tiles_a,
                                    args_b) != cudaErrorCooperativeLaunchTooLarge;
      if (!launched) (void)cudaGetLastError();
    });
  });
  return launched;
}

void hla_project(const void* t, InType type, int64_t length, int64_t channels, const HlaWindows& windows,
                 const int* rows, int rank, float* out, cudaStream_t stream) {
  const HlaRows kept = hla_rows(rows, rank);
  HlaShape sh = hla_shape(length, channels, windows, rank);
  const bool vec4 = channels % 4 == 0;
  const unsigned tiles = vec4 ? hla_tiles<4>(sh) : hla_tiles<1>(sh);  // sets sh.tiles_c
  with_input_type(t, type, [&](auto p) {
    using T = element_of<decltype(p)>;
    if (vec4) {
      hla_project_kernel<T, 4><<<tiles, kHlaThreads, 0, stream>>>(p, sh, kept, out);
    } else {
      hla_project_kernel<T, 1><<<tiles, kHlaThreads, 0, stream>>>(p, sh, kept, out);
    }
  });
}

void hla_unproject(const float* p, int64_t length, int64_t channels, const HlaWindows& windows, const int* rows,
                   int rank, float* out, cudaStream_t stream) {
  const HlaRows kept = hla_rows(rows, rank);
  HlaShape sh = hla_shape(length, channels, windows, rank);
  const bool vec4 = channels % 4 == 0;
  const unsigned tiles = vec4 ? hla_tiles<4>(sh) : hla_tiles<1>(sh);  // sets sh.tiles_c
  if (vec4) {
    hla_unproject_kernel<4><<<tiles, kHlaThreads, 0, stream>>>(p, sh, kept, out);
  } else {
    hla_unproject_kernel<1><<<tiles, kHlaThreads, 0, stream>>>(p, sh, kept, out);
  }
}

void dequantize_i32(const int32_t* acc, int64_t m, int64_t n, const float* row, bool row_vec, const float* col,
                    bool col_vec, float divisor, float* out, cudaStream_t stream) {
  const bool vec = n % 4 == 0 && aligned16(acc);
  dequantize_kernel<int32_t><<<dequantize_grid(m, n), kThreads, 0, stream>>>(acc, m, n, row, row_vec, col, col_vec,
                                                                             divisor, vec, out);
}

void dequantize_f32(const float* acc, int64_t m, int64_t n, const float* row, bool row_vec, const float* col,
                    bool col_vec, float divisor, float* out, cudaStream_t stream) {
  const bool vec = n % 4 == 0 && aligned16(acc);
  dequantize_kernel<float><<<dequantize_grid(m, n), kThreads, 0, stream>>>(acc, m, n, row, row_vec, col, col_vec,
                                                                           divisor, vec, out);
}

void scale_columns(const float* col, bool col_vec, float factor, int64_t n, float* out, cudaStream_t stream) {
  scale_columns_kernel<<<grid_for(n), kThreads, 0, stream>>>(col, col_vec, factor, n, out);
}

void pad_columns_i8(const int8_t* a, int64_t a_rows, int64_t a_pitch, int8_t* a_out, const int8_t* b, int64_t b_rows,
                    int64_t b_pitch, int8_t* b_out, int64_t cols, int64_t cols_pad, cudaStream_t stream) {
  pad_columns_kernel<<<grid_for((a_rows + b_rows) * (cols_pad / 16)), kThreads, 0, stream>>>(
      a, a_rows, a_pitch, a_out, b, b_rows, b_pitch, b_out, cols, cols_pad);
}

void codes_to_e4m3(const int8_t* in, int64_t rows, int64_t cols, int64_t cols_pad, uint8_t* out,
                   cudaStream_t stream) {
  if (cols == cols_pad && cols % 16 == 0 && aligned16(in) && aligned16(out)) {
    const int64_t chunks = rows * cols / 16;
    codes_to_e4m3_vec_kernel<<<grid_for(chunks), kThreads, 0, stream>>>(reinterpret_cast<const uint4*>(in), chunks,
                                                                        reinterpret_cast<uint4*>(out));
  } else {
    codes_to_e4m3_kernel<<<grid_for(rows * cols_pad), kThreads, 0, stream>>>(in, rows, cols, cols_pad, out);
  }
}

void advance_step(int64_t* step, int64_t* saved, cudaStream_t stream) {
  advance_step_kernel<<<1, 1, 0, stream>>>(step, saved);
}

void hash_uniform(float* out, int64_t n, HashKey key, cudaStream_t stream) {
  hash_uniform_kernel<<<grid_for((n + 3) / 4), kThreads, 0, stream>>>(out, n, key);
}

void pack_int4(const int8_t* in, int64_t rows, int64_t cols, int64_t cols_pad, uint8_t* out, cudaStream_t stream) {
  pack_int4_kernel<<<grid_for(rows * cols_pad / 2), kThreads, 0, stream>>>(in, rows, cols, cols_pad, out);
}

void quantize_grad_output(const void* g_y, InType type, const GradOutputQuant& q, cudaStream_t stream) {
  const HlaRows kept = hla_rows(q.rows, q.rank);
  const HlaShape sh = hla_shape(q.length, q.channels, q.windows, q.rank);
  with_input_type(g_y, type, [&](auto g) {
    with_hadamard_block(q.block, [&](auto n) {
      launch_grad_output<element_of<decltype(g)>, decltype(n)::value>(g, sh, kept, q, stream);
    });
  });
}

}  // namespace hot
