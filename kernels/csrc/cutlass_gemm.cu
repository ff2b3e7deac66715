// CUTLASS 2.x sm80 tensor-op integer GEMMs for Ampere/Ada (native INT4/INT8 IMMA): one instantiation
// each, to keep compile time low. They also run on Hopper (INT4 emulated, slow), which is how the GPU
// tests check them there; Hopper's fast path is FP8/INT8 through cuBLASLt (see hot_kernels/__init__.py).
#include "hot_kernels.h"

#include "cutlass/cutlass.h"
#include "cutlass/gemm/device/gemm.h"
#include "cutlass/numeric_types.h"

namespace hot {
namespace {

template <typename Element, int KTile, int KInst>
using IntGemm = cutlass::gemm::device::Gemm<
    Element, cutlass::layout::RowMajor, Element, cutlass::layout::ColumnMajor, int32_t, cutlass::layout::RowMajor,
    int32_t, cutlass::arch::OpClassTensorOp, cutlass::arch::Sm80, cutlass::gemm::GemmShape<128, 128, KTile>,
    cutlass::gemm::GemmShape<64, 64, KTile>, cutlass::gemm::GemmShape<16, 8, KInst>,
    cutlass::epilogue::thread::LinearCombination<int32_t, 4, int32_t, int32_t>,
    cutlass::gemm::threadblock::GemmIdentityThreadblockSwizzle<>, 3>;

using GemmS4 = IntGemm<cutlass::int4b_t, 128, 64>;
using GemmS8 = IntGemm<int8_t, 64, 32>;

template <typename Gemm, typename Element>
int run_gemm(const Element* a, const Element* b, int32_t* d, int m, int n, int k, cudaStream_t stream) {
  typename Gemm::Arguments args({m, n, k}, {a, k}, {b, k}, {d, n}, {d, n}, {1, 0});
  Gemm gemm;
  cutlass::Status status = gemm.can_implement(args);
  if (status != cutlass::Status::kSuccess) return static_cast<int>(status);
  status = gemm.initialize(args, nullptr, stream);
  if (status != cutlass::Status::kSuccess) return static_cast<int>(status);
  return static_cast<int>(gemm(stream));
}

}  // namespace

int cutlass_gemm_s4(const uint8_t* a, const uint8_t* b, int32_t* d, int m, int n, int k, cudaStream_t stream) {
  return run_gemm<GemmS4>(reinterpret_cast<const cutlass::int4b_t*>(a), reinterpret_cast<const cutlass::int4b_t*>(b),
                          d, m, n, k, stream);
}

int cutlass_gemm_s8(const int8_t* a, const int8_t* b, int32_t* d, int m, int n, int k, cudaStream_t stream) {
  return run_gemm<GemmS8>(a, b, d, m, n, k, stream);
}

const char* cutlass_status_string(int status) {
  return cutlassGetStatusString(static_cast<cutlass::Status>(status));
}

}  // namespace hot
