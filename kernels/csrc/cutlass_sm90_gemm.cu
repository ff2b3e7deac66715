// CUTLASS 3.x INT8 x INT8 -> INT32 GEMM for Hopper (sm_90a): TMA loads into a multi-stage shared-memory
// ring, wgmma (IGMMA) on int8 K-major operands, warp-specialised producer/consumer warp groups, TMA store of
// the int32 tile. HOT's weight-gradient GEMM: D (M x N, int32 row-major) = A (M x K row-major) * B with B
// stored N x K row-major (the TN layout of cutlass_gemm_s8). The same two kernels with an epilogue visitor tree
// in place of the int32 store give D dequantised, float32 (cutlass_gemm_s8_sm90_dequant): `dequantize`'s bits.
//
// Why these kernels. The g_w GEMMs are long-K, small-MN (M 768..3072, N 768..3072, K ~12608), so a
// 128 x 128 tile grid has only 36..144 tiles for the H100's 132 SMs: a data-parallel grid leaves SMs idle or
// runs a mostly empty second wave. Variant 0 is therefore the cooperative schedule (two consumer warp groups
// share one 128 x 128 tile, the deepest pipeline per accumulator byte) on CUTLASS's stream-K tile scheduler,
// which can split the K loop of the leftover tiles over the idle SMs; its partial sums are int32, so any
// reduction order gives the exact result. Variant 1 is the ping-pong schedule with 64 x 128 tiles (each
// consumer warp group owns a tile, so one group's epilogue overlaps the other's MMAs; four times the tiles,
// hence fewer idle SMs without any K split). Both use 2 x 1 x 1 clusters: the CTA pair shares B's tile by
// TMA multicast, which halves B's L2 traffic (the kernel needs ~8 bytes of operand per 1 k MAC).
//
// Opt-in (HOT_KERNELS_SM90A=1 at build time, which compiles 9.0 as sm_90a and defines HOT_SM90A_GEMM): it
// doubles the build time. The host code instantiates the GEMMs only with that macro, CUDA 12+ and 9.0 in the
// nvcc architecture list, and the kernels' bodies exist only in the compute_90a pass (wgmma is sm_90a-only).
// Otherwise the entry points report kSm90NotCompiled. A probe kernel tells at run time whether the device
// runs the sm_90a image (an sm_80 image would run the empty body instead).
#include "hot_kernels.h"

#include "cutlass/cutlass.h"

#if defined(HOT_SM90A_GEMM) && defined(__CUDACC_VER_MAJOR__) && __CUDACC_VER_MAJOR__ >= 12 && \
    defined(__CUDA_ARCH_LIST__)
#define HOT_SM90_GEMM_HEADERS 1
#include "cute/tensor.hpp"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/epilogue/fusion/sm90_callbacks_tma_warpspecialized.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/dispatch_policy.hpp"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
#include "cutlass/gemm/kernel/tile_scheduler.hpp"
#include "cutlass/kernel_hardware_info.h"
#endif

#include <atomic>
#include <utility>

namespace hot {
namespace {

std::atomic<bool> sm90_balanced_grid{true};
std::atomic<bool> sm90_programmatic_launch{true};

#if defined(HOT_SM90_GEMM_HEADERS)
constexpr int kArchList[] = {__CUDA_ARCH_LIST__};

constexpr bool arch_list_has_sm90() {
  for (int arch : kArchList) {
    if (arch == 900) return true;
  }
  return false;
}
// The same value in the host pass and in every device pass, so both see the same kernel instantiations.
constexpr bool kSm90Compiled = arch_list_has_sm90();
#else
constexpr bool kSm90Compiled = false;
#endif

// Never launched: only its attributes are read. Its static shared memory exists only in the sm_90a image.
__global__ void sm90a_probe_kernel(int* out) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int kThreads = 32;
  __shared__ int tag[kThreads];
  tag[threadIdx.x % kThreads] = static_cast<int>(threadIdx.x);
  __syncthreads();
  out[threadIdx.x] = tag[kThreads - 1 - threadIdx.x % kThreads];
#else
  (void)out;
#endif
}

// Per device, zero-initialised: 0 not yet probed, 1 no, 2 the device runs this file's sm_90a code.
constexpr int kMaxDevices = 64;
std::atomic<int> g_sm90a_image[kMaxDevices];

bool device_runs_sm90a() {
  if (!kSm90Compiled) return false;
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= kMaxDevices) {
    cudaGetLastError();
    return false;
  }
  const int cached = g_sm90a_image[device].load(std::memory_order_relaxed);
  if (cached != 0) return cached == 2;
  cudaFuncAttributes attr{};
  bool yes = false;
  if (cudaFuncGetAttributes(&attr, sm90a_probe_kernel) == cudaSuccess) {
    yes = attr.sharedSizeBytes > 0;
  } else {
    cudaGetLastError();  // no image for this device: clear the error, report unavailable
  }
  g_sm90a_image[device].store(yes ? 2 : 1, std::memory_order_relaxed);
  return yes;
}

#if defined(HOT_SM90_GEMM_HEADERS)
using namespace cute;

// Runs the CUTLASS kernel only in the compute_90a device pass; elsewhere the kernel is an empty stub, so the
// sm_80/86/89 passes do not compile the sm90 mainloop at all (and never print CUTLASS's arch error). The kernel
// first waits for the grid before it (griddepcontrol.wait, a no-op unless launched as its programmatic dependent:
// sm90_programmatic_launch), so its launch may overlap that grid's completion (no kernel here signals its
// dependents early: the launch follows the last CTA's exit, not the grid's memory flush). Not CUTLASS's own
// CUTLASS_ENABLE_GDC_FOR_SM90, which waits later (after the kernel's set-up) but does not compile with the
// stream-K scheduler of this CUTLASS (its is_last_tile binds a const member to a non-const reference).
template <class Kernel>
struct Sm90aOnly : Kernel {
  CUTLASS_DEVICE void operator()(typename Kernel::Params const& params, char* smem) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    asm volatile("griddepcontrol.wait;" ::: "memory");
    Kernel::operator()(params, smem);
#else
    (void)params;
    (void)smem;
#endif
  }
};

// D = 1 * acc (int32 compute, exact).
using IdentityEpilogue = cutlass::epilogue::fusion::LinearCombination<int32_t, int32_t, void, int32_t>;

// D (float) = (float(acc) * row[m]) * (col[n] * inv_divisor): `dequantize`'s arithmetic in the epilogue (its
// col / divisor equals col * inv_divisor bit for bit where the divisor is a power of two, which the caller
// checks). Each scale is a vector or one number, chosen at run time by its bool stride (true: a vector).
template <class TileShape>
using DequantEpilogue = cutlass::epilogue::fusion::Sm90EVT<
    cutlass::epilogue::fusion::Sm90Compute<cutlass::multiplies, float, float, cutlass::FloatRoundStyle::round_to_nearest>,
    cutlass::epilogue::fusion::Sm90EVT<
        cutlass::epilogue::fusion::Sm90Compute<cutlass::multiplies, float, float,
                                               cutlass::FloatRoundStyle::round_to_nearest>,
        cutlass::epilogue::fusion::Sm90AccFetch,
        cutlass::epilogue::fusion::Sm90ColBroadcast<0, TileShape, float, float, Stride<bool, _0, _0>>>,
    cutlass::epilogue::fusion::Sm90EVT<
        cutlass::epilogue::fusion::Sm90Compute<cutlass::multiplies, float, float,
                                               cutlass::FloatRoundStyle::round_to_nearest>,
        cutlass::epilogue::fusion::Sm90RowBroadcast<0, TileShape, float, float, Stride<_0, bool, _0>>,
        cutlass::epilogue::fusion::Sm90ScalarBroadcast<float>>>;

template <class TileShape, class ClusterShape, class MainloopSchedule, class EpilogueSchedule, class Scheduler,
          class ElementD = int32_t, class Fusion = IdentityEpilogue>
struct S8Gemm {
  // 16 int8 = 16 bytes: TMA's minimum global alignment for A and B; 16 bytes of D (int32 or float).
  static constexpr int kAlignAB = 16;
  static constexpr int kAlignD = 4;
  using ElementCompute = cute::conditional_t<cute::is_same_v<ElementD, int32_t>, int32_t, float>;

  // C = void: no source tensor is read, no smem for it.
  using Epilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
      cutlass::epilogue::collective::EpilogueTileAuto, int32_t, ElementCompute, void, cutlass::layout::RowMajor,
      kAlignD, ElementD, cutlass::layout::RowMajor, kAlignD, EpilogueSchedule, Fusion>::CollectiveOp;

  using Mainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, int8_t, cutlass::layout::RowMajor, kAlignAB, int8_t,
      cutlass::layout::ColumnMajor, kAlignAB, int32_t, TileShape, ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(sizeof(typename Epilogue::SharedStorage))>,
      MainloopSchedule>::CollectiveOp;

  using Kernel = cutlass::gemm::kernel::GemmUniversal<Shape<int, int, int, int>, Mainloop, Epilogue, Scheduler>;
  using Device = cutlass::gemm::device::GemmUniversalAdapter<Sm90aOnly<Kernel>>;
};

using CoopTile = Shape<_128, _128, _128>;
using PingpongTile = Shape<_64, _128, _128>;
// Variant 0: cooperative, 128 x 128 x 128 (K tile = 128 bytes, the 128-byte swizzle), stream-K scheduler.
template <class ElementD = int32_t, class Fusion = IdentityEpilogue>
using CoopOf = typename S8Gemm<CoopTile, Shape<_2, _1, _1>, cutlass::gemm::KernelTmaWarpSpecializedCooperative,
                               cutlass::epilogue::TmaWarpSpecializedCooperative, cutlass::gemm::StreamKScheduler,
                               ElementD, Fusion>::Device;
// Variant 1: ping-pong, 64 x 128 x 128, persistent data-parallel scheduler (ping-pong has no stream-K).
template <class ElementD = int32_t, class Fusion = IdentityEpilogue>
using PingpongOf = typename S8Gemm<PingpongTile, Shape<_2, _1, _1>, cutlass::gemm::KernelTmaWarpSpecializedPingpong,
                                   cutlass::epilogue::TmaWarpSpecialized, cutlass::gemm::PersistentScheduler,
                                   ElementD, Fusion>::Device;
using GemmCoop = CoopOf<>;
using GemmPingpong = PingpongOf<>;
using GemmCoopDequant = CoopOf<float, DequantEpilogue<CoopTile>>;
using GemmPingpongDequant = PingpongOf<float, DequantEpilogue<PingpongTile>>;

template <class Gemm>
using FusionArgs = decltype(std::declval<typename Gemm::Arguments&>().epilogue.thread);

template <class Gemm>
FusionArgs<Gemm> identity_args() {
  FusionArgs<Gemm> thread{};
  thread.alpha = 1;
  thread.beta = 0;
  return thread;
}

// The arguments nest as the tree does: each node's children, then its own.
template <class Gemm>
FusionArgs<Gemm> dequant_args(const Sm90DequantScales& s) {
  return {{{}, {s.row, 0.0f, {s.row_vec, _0{}, _0{}}}, {}},
          {{s.col, 0.0f, {_0{}, s.col_vec, _0{}}}, {{s.inv_divisor}}, {}},
          {}};
}

template <class Gemm, class ElementD>
typename Gemm::Arguments make_args(const int8_t* a, int64_t lda, const int8_t* b, int64_t ldb, ElementD* d, int m,
                                   int n, int k, int decomposition, int splits, cutlass::KernelHardwareInfo hw,
                                   const FusionArgs<Gemm>& thread) {
  using Kernel = typename Gemm::GemmKernel;
  // (rows, contiguous, batch) strides: A (M, K) rows lda apart, B (N, K) rows ldb apart, D (M, N) packed; L = 1.
  using RowStride = Stride<int64_t, _1, int64_t>;
  static_assert(cute::is_same_v<typename Kernel::StrideA, RowStride> &&
                cute::is_same_v<typename Kernel::StrideB, RowStride> &&
                cute::is_same_v<typename Kernel::StrideD, RowStride>);
  const RowStride stride_a{lda, _1{}, int64_t(m) * lda};
  const RowStride stride_b{ldb, _1{}, int64_t(n) * ldb};
  const RowStride stride_d{int64_t(n), _1{}, int64_t(m) * n};
  typename Gemm::Arguments args{};
  args.mode = cutlass::gemm::GemmUniversalMode::kGemm;
  args.problem_shape = make_shape(m, n, k, 1);
  args.mainloop.ptr_A = a;
  args.mainloop.dA = stride_a;
  args.mainloop.ptr_B = b;
  args.mainloop.dB = stride_b;
  args.epilogue.thread = thread;
  args.epilogue.ptr_C = nullptr;
  args.epilogue.dC = stride_d;
  args.epilogue.ptr_D = d;
  args.epilogue.dD = stride_d;
  args.hw_info = hw;
  if constexpr (cute::is_same_v<typename Kernel::TileSchedulerTag, cutlass::gemm::PersistentScheduler>) {
    // sm90_pingpong_clusters counts 128 x 128 cluster tiles of 2 CTAs (CUTLASS reads max_active_clusters only for
    // clusters of more than one CTA), with the scheduler's swizzle left at 1 (a larger one rounds the tile counts up)
    static_assert(cute::size(typename Kernel::ClusterShape{}) == 2);
    static_assert(cute::size<0>(typename Kernel::TileShape{}) * cute::size<0>(typename Kernel::ClusterShape{}) ==
                      128 &&
                  cute::size<1>(typename Kernel::TileShape{}) * cute::size<1>(typename Kernel::ClusterShape{}) ==
                      128);
    if (sm90_balanced_grid.load(std::memory_order_relaxed)) {
      args.hw_info.max_active_clusters = sm90_pingpong_clusters(m, n, hw.sm_count);
    }
  }
  if constexpr (cute::is_same_v<typename Kernel::TileSchedulerTag, cutlass::gemm::StreamKScheduler>) {
    using Mode = cutlass::gemm::kernel::detail::DecompositionMode;
    using Reduction = cutlass::gemm::kernel::detail::ReductionMode;
    constexpr Mode kModes[] = {Mode::Heuristic, Mode::DataParallel, Mode::StreamK, Mode::SplitK};
    args.scheduler.decomposition_mode = kModes[decomposition];
    args.scheduler.splits = decomposition == kSm90SplitK ? splits : 1;
    // int32 partial sums: every reduction order gives the same bits, so take the unordered (faster) one.
    args.scheduler.reduction_mode = Reduction::Nondeterministic;
  }
  return args;
}

// The current device and its SM count (0 on error): the persistent and stream-K schedulers size the grid by it.
[[maybe_unused]] cutlass::KernelHardwareInfo current_device_info() {
  cutlass::KernelHardwareInfo hw{};
  if (cudaGetDevice(&hw.device_id) != cudaSuccess ||
      cudaDeviceGetAttribute(&hw.sm_count, cudaDevAttrMultiProcessorCount, hw.device_id) != cudaSuccess) {
    cudaGetLastError();
    hw.sm_count = 0;
  }
  return hw;
}

// The (variant, decomposition, splits) combinations that exist.
[[maybe_unused]] bool valid_config(int variant, int decomposition, int splits) {
  if (decomposition < kSm90Heuristic || decomposition > kSm90SplitK) return false;
  if (decomposition == kSm90SplitK && splits < 2) return false;
  if (variant == 0) return true;
  if (variant == 1) return decomposition == kSm90Heuristic || decomposition == kSm90DataParallel;
  return false;
}

template <class Gemm>
using OutputOf = typename Gemm::GemmKernel::ElementD;

template <class Gemm>
int64_t workspace_of(int m, int n, int k, int decomposition, int splits) {
  auto args = make_args<Gemm, OutputOf<Gemm>>(nullptr, k, nullptr, k, nullptr, m, n, k, decomposition, splits,
                                              current_device_info(), FusionArgs<Gemm>{});
  return static_cast<int64_t>(Gemm::get_workspace_size(args));
}

template <class Gemm>
int64_t ctas_of(const int8_t* a, int64_t lda, const int8_t* b, int64_t ldb, void* d, int m, int n, int k) {
  auto args = make_args<Gemm>(a, lda, b, ldb, static_cast<OutputOf<Gemm>*>(d), m, n, k, kSm90Heuristic, 1,
                              current_device_info(), FusionArgs<Gemm>{});
  if (args.hw_info.sm_count <= 0) return 0;
  const dim3 grid = Gemm::get_grid_shape(args);
  return static_cast<int64_t>(grid.x) * grid.y * grid.z;
}

template <class Gemm>
int run_gemm(const int8_t* a, int64_t lda, const int8_t* b, int64_t ldb, OutputOf<Gemm>* d,
             const FusionArgs<Gemm>& thread, int m, int n, int k, int decomposition, int splits, void* workspace,
             int64_t workspace_bytes, cudaStream_t stream) {
  auto args = make_args<Gemm>(a, lda, b, ldb, d, m, n, k, decomposition, splits, current_device_info(), thread);
  if (args.hw_info.sm_count <= 0) return static_cast<int>(cutlass::Status::kErrorInternal);
  if (lda % 16 != 0 || ldb % 16 != 0 || lda < k || ldb < k) {
    return static_cast<int>(cutlass::Status::kErrorMisalignedOperand);
  }
  // CUTLASS's TMA check asks K % 16 of the problem (its strides default-constructed), where the hardware asks it of
  // the row pitches only; a K tile past K is filled with zeros by TMA. So the check is asked of K rounded up.
  auto checked = args;
  cute::get<2>(checked.problem_shape) = (k + 15) / 16 * 16;
  cutlass::Status status = Gemm::can_implement(checked);
  if (status != cutlass::Status::kSuccess) return static_cast<int>(status);
  if (static_cast<int64_t>(Gemm::get_workspace_size(args)) > workspace_bytes) return kSm90WorkspaceTooSmall;
  Gemm gemm;
  status = gemm.initialize(args, workspace, stream);
  if (status != cutlass::Status::kSuccess) return static_cast<int>(status);
  return static_cast<int>(gemm.run(stream, nullptr, sm90_programmatic_launch.load(std::memory_order_relaxed)));
}

// Templates so that the GEMM types are instantiated only when Enabled (the sm90 build).
template <bool Enabled>
int64_t dispatch_workspace(int m, int n, int k, int variant, int decomposition, int splits, bool dequant) {
  if constexpr (Enabled) {
    if (dequant) {
      if (variant == 0) return workspace_of<GemmCoopDequant>(m, n, k, decomposition, splits);
      return workspace_of<GemmPingpongDequant>(m, n, k, decomposition, splits);
    }
    if (variant == 0) return workspace_of<GemmCoop>(m, n, k, decomposition, splits);
    return workspace_of<GemmPingpong>(m, n, k, decomposition, splits);
  } else {
    return 0;
  }
}

template <bool Enabled>
int64_t dispatch_ctas(const int8_t* a, int64_t lda, const int8_t* b, int64_t ldb, void* d, int m, int n, int k,
                      int variant, bool dequant) {
  if constexpr (Enabled) {
    if (dequant) {
      return variant == 0 ? ctas_of<GemmCoopDequant>(a, lda, b, ldb, d, m, n, k)
                          : ctas_of<GemmPingpongDequant>(a, lda, b, ldb, d, m, n, k);
    }
    return variant == 0 ? ctas_of<GemmCoop>(a, lda, b, ldb, d, m, n, k)
                        : ctas_of<GemmPingpong>(a, lda, b, ldb, d, m, n, k);
  } else {
    return 0;
  }
}

template <bool Enabled>
int dispatch_gemm(const int8_t* a, int64_t lda, const int8_t* b, int64_t ldb, int32_t* d, int m, int n, int k,
                  int variant, int decomposition, int splits, void* workspace, int64_t workspace_bytes,
                  cudaStream_t stream) {
  if constexpr (Enabled) {
    if (variant == 0)
      return run_gemm<GemmCoop>(a, lda, b, ldb, d, identity_args<GemmCoop>(), m, n, k, decomposition, splits,
                                workspace, workspace_bytes, stream);
    return run_gemm<GemmPingpong>(a, lda, b, ldb, d, identity_args<GemmPingpong>(), m, n, k, decomposition, splits,
                                  workspace, workspace_bytes, stream);
  } else {
    return kSm90NotCompiled;
  }
}

template <bool Enabled>
int dispatch_gemm_dequant(const int8_t* a, int64_t lda, const int8_t* b, int64_t ldb, float* d,
                          const Sm90DequantScales& scales, int m, int n, int k, int variant, int decomposition,
                          int splits, void* workspace, int64_t workspace_bytes, cudaStream_t stream) {
  if constexpr (Enabled) {
    if (variant == 0)
      return run_gemm<GemmCoopDequant>(a, lda, b, ldb, d, dequant_args<GemmCoopDequant>(scales), m, n, k,
                                       decomposition, splits, workspace, workspace_bytes, stream);
    return run_gemm<GemmPingpongDequant>(a, lda, b, ldb, d, dequant_args<GemmPingpongDequant>(scales), m, n, k,
                                         decomposition, splits, workspace, workspace_bytes, stream);
  } else {
    return kSm90NotCompiled;
  }
}
#endif  // HOT_SM90_GEMM_HEADERS

}  // namespace

bool cutlass_sm90_available() { return device_runs_sm90a(); }

void set_sm90_balanced_grid(bool enabled) { sm90_balanced_grid.store(enabled, std::memory_order_relaxed); }

void set_sm90_programmatic_launch(bool enabled) {
  sm90_programmatic_launch.store(enabled, std::memory_order_relaxed);
}

int sm90_pingpong_clusters(int64_t m, int64_t n, int sm_count) {
  const int64_t full = sm_count / 2;
  if (m <= 0 || n <= 0 || full <= 0) return 0;  // 0: CUTLASS's own grid
  const int64_t tiles = ((m + 127) / 128) * ((n + 127) / 128);  // a 2 x 1 cluster of 64 x 128 tiles spans 128 x 128
  const int64_t waves = (tiles + full - 1) / full;
  return static_cast<int>((tiles + waves - 1) / waves);
}

int64_t cutlass_gemm_s8_sm90_workspace(int m, int n, int k, int variant, int decomposition, int splits,
                                       bool dequant) {
#if defined(HOT_SM90_GEMM_HEADERS)
  if (!kSm90Compiled || !valid_config(variant, decomposition, splits)) return 0;
  return dispatch_workspace<kSm90Compiled>(m, n, k, variant, decomposition, splits, dequant);
#else
  (void)m, (void)n, (void)k, (void)variant, (void)decomposition, (void)splits, (void)dequant;
  return 0;
#endif
}

int64_t cutlass_gemm_s8_sm90_ctas(const int8_t* a, int64_t lda, const int8_t* b, int64_t ldb, void* d, int m, int n,
                                  int k, int variant, bool dequant) {
#if defined(HOT_SM90_GEMM_HEADERS)
  if (!kSm90Compiled || (variant != 0 && variant != 1)) return 0;
  return dispatch_ctas<kSm90Compiled>(a, lda, b, ldb, d, m, n, k, variant, dequant);
#else
  (void)a, (void)lda, (void)b, (void)ldb, (void)d, (void)m, (void)n, (void)k, (void)variant, (void)dequant;
  return 0;
#endif
}

int cutlass_gemm_s8_sm90(const int8_t* a, int64_t lda, const int8_t* b, int64_t ldb, int32_t* d, int m, int n, int k,
                         int variant, int decomposition, int splits, void* workspace, int64_t workspace_bytes,
                         cudaStream_t stream) {
  if (!device_runs_sm90a()) return kSm90NotCompiled;
#if defined(HOT_SM90_GEMM_HEADERS)
  if (!valid_config(variant, decomposition, splits)) return kSm90BadConfig;
  return dispatch_gemm<kSm90Compiled>(a, lda, b, ldb, d, m, n, k, variant, decomposition, splits, workspace,
                                      workspace_bytes, stream);
#else
  (void)a, (void)lda, (void)b, (void)ldb, (void)d, (void)m, (void)n, (void)k, (void)variant, (void)decomposition;
  (void)splits;
  (void)workspace, (void)workspace_bytes, (void)stream;
  return kSm90NotCompiled;
#endif
}

int cutlass_gemm_s8_sm90_dequant(const int8_t* a, int64_t lda, const int8_t* b, int64_t ldb, float* d,
                                 const Sm90DequantScales& scales, int m, int n, int k, int variant, int decomposition,
                                 int splits, void* workspace, int64_t workspace_bytes, cudaStream_t stream) {
  if (!device_runs_sm90a()) return kSm90NotCompiled;
#if defined(HOT_SM90_GEMM_HEADERS)
  if (!valid_config(variant, decomposition, splits)) return kSm90BadConfig;
  return dispatch_gemm_dequant<kSm90Compiled>(a, lda, b, ldb, d, scales, m, n, k, variant, decomposition, splits,
                                              workspace, workspace_bytes, stream);
#else
  (void)a, (void)lda, (void)b, (void)ldb, (void)d, (void)scales, (void)m, (void)n, (void)k, (void)variant;
  (void)decomposition;
  (void)splits, (void)workspace, (void)workspace_bytes, (void)stream;
  return kSm90NotCompiled;
#endif
}

const char* cutlass_sm90_status_string(int status) {
  switch (status) {
    case kSm90NotCompiled:
      return "the sm_90a INT8 GEMM is not available: the extension was not built for sm_90a (CUDA 12+, arch 9.0) "
             "or the device is not compute capability 9.0";
    case kSm90BadConfig:
      return "invalid sm90 GEMM configuration (variant 0 takes decomposition 0..3, split-K needs splits >= 2; "
             "variant 1 takes decomposition 0 or 1)";
    case kSm90WorkspaceTooSmall:
      return "the sm90 GEMM workspace is smaller than cutlass_gemm_s8_sm90_workspace() reports";
    default:
      return cutlassGetStatusString(static_cast<cutlass::Status>(status));
  }
}

}  // namespace hot
