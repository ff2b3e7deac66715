// Per-element arithmetic of the quantisers: the counter hash, scales, codes, the e4m3 operand byte.
// Host and device: tests/kernels/test_quant_scalar.py compiles these for the CPU (no GPU needed) and
// checks them bit for bit against the PyTorch reference. On the device every float operation is an
// explicit IEEE round-to-nearest intrinsic; on the host the same operations are plain C++ float
// arithmetic, which is IEEE round-to-nearest too (build without fast-math or FMA contraction).
#pragma once

#include <cuda_fp8.h>

#include <cmath>
#include <cstdint>
#include <cstring>

#define HOT_HD __host__ __device__ __forceinline__

namespace hot {

HOT_HD float add_rn(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}

HOT_HD float mul_rn(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}

HOT_HD float div_rn(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}

HOT_HD float sub_rn(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}

HOT_HD float sqrt_rn(float a) {
#ifdef __CUDA_ARCH__
  return __fsqrt_rn(a);
#else
  return std::sqrt(a);
#endif
}

HOT_HD float fma_rn(float a, float b, float c) {
#ifdef __CUDA_ARCH__
  return __fmaf_rn(a, b, c);
#else
  return std::fmaf(a, b, c);
#endif
}

HOT_HD float rcp_rn(float a) {
#ifdef __CUDA_ARCH__
  return __frcp_rn(a);
#else
  return 1.0f / a;
#endif
}

// A quantiser's scale with its correctly rounded reciprocal, made once per scale: dividing each element by it
// is then a multiply and two FMAs instead of an IEEE division.
struct Scale {
  float s, r;
};

HOT_HD Scale scale_of(float s) { return Scale{s, rcp_rn(s)}; }

// v / s by Markstein: q = RN(v·r) is within an ulp of v/s, the FMA gives v − q·s exactly while that residual is
// not subnormal (|v| ≥ 2^-100 keeps it clear), and RN(q + (v − q·s)·r) is then RN(v / s). markstein_exact says
// where that holds; tiny v and huge quotients (neither occurs in a quantiser but for all-but-underflowed tensors)
// need the IEEE division.
HOT_HD bool markstein_exact(float v, float q) { return fabsf(v) >= 0x1p-100f && fabsf(q) < 0x1p100f; }

HOT_HD float markstein(float v, float q, const Scale& sc) { return fma_rn(fma_rn(-q, sc.s, v), sc.r, q); }

// Whether a scale and its reciprocal are finite: under s = inf, r = 0 passes markstein_exact's tests but v − q·s is
// NaN; under a tiny s, r = inf.
HOT_HD bool finite_scale(const Scale& sc) { return fabsf(sc.s) <= 3.40282347e38f && fabsf(sc.r) <= 3.40282347e38f; }

// v / s correctly rounded, as div_rn.
HOT_HD float div_scale(float v, const Scale& sc) {
  const float q = mul_rn(v, sc.r);
  if (!(finite_scale(sc) && markstein_exact(v, q))) return div_rn(v, sc.s);
  return markstein(v, q, sc);
}

// MurmurHash3's finaliser, fmix32(h) = xorshift16(fmix32_core(xorshift16(h))). xorshift16 is linear over XOR
// (xorshift16(a ^ b) = xorshift16(a) ^ xorshift16(b)) and its own inverse, which the per-code hashes below use.
constexpr uint32_t kFmixMul1 = 0x85EBCA6Bu, kFmixMul2 = 0xC2B2AE35u;

HOT_HD uint32_t xorshift16(uint32_t h) { return h ^ (h >> 16); }

// fmix32 between its first and last xorshift.
HOT_HD uint32_t fmix32_core(uint32_t h) {
  h *= kFmixMul1;
  h ^= h >> 13;
  return h * kFmixMul2;
}

HOT_HD uint32_t fmix32(uint32_t h) { return xorshift16(fmix32_core(xorshift16(h))); }

// hot.rounding.hash_key: the key of (seed, layer, step, stream, rank), each taken mod 2^32.
HOT_HD uint32_t hash_key(uint32_t seed, uint32_t layer, uint32_t step, uint32_t stream, uint32_t rank) {
  const uint32_t key = fmix32(fmix32(fmix32(fmix32(seed) ^ layer) ^ step) ^ stream);
  return rank == 0u ? key : fmix32(key ^ rank);
}

// The per-code hashes from x = xorshift16(index) and key_x = xorshift16(key), without an xorshift that cancels:
//   fmix32(fmix32(index) ^ key) = xorshift16(fmix32_core(fmix32_core(x) ^ key_x))    hash "fmix32x2"
//   fmix32(index ^ key)         = xorshift16(fmix32_core(x ^ key_x))                 hash "fmix32"
// (the first: fmix32(index) ^ key, shifted, is xorshift16(xorshift16(fmix32_core(x))) ^ key_x = fmix32_core(x) ^
// key_x). The key's half is one constant per call, so the second finaliser's first step is one XOR, and a run of
// indices takes x from its first index (stochastic_run_codes_biased): 19 integer instructions a code became 13 in
// the HQ pass's SASS (the index and the uniform's shift included).
HOT_HD uint32_t hash_of_mixed(uint32_t x, uint32_t key_x) { return xorshift16(fmix32_core(fmix32_core(x) ^ key_x)); }

HOT_HD uint32_t hash_single_of_mixed(uint32_t x, uint32_t key_x) { return xorshift16(fmix32_core(x ^ key_x)); }

constexpr float kUniformStep = 5.9604644775390625e-08f;  // 2^-24: a uniform's 24 bits scaled into [0, 1)

// hot.rounding.uniform of a hash: 24 random bits times 2^-24 (exact in float32).
HOT_HD float uniform_of_hash(uint32_t h) {
  return mul_rn(static_cast<float>(h >> 8), kUniformStep);  // h >> 8 < 2^24: exact
}

// RN(q + uniform_of_hash(h)) as one FMA: the product is exact, so its only rounding is the addition's.
HOT_HD float add_uniform_of_hash(float q, uint32_t h) { return fma_rn(static_cast<float>(h >> 8), kUniformStep, q); }

// hot.rounding.uniform under hash "fmix32x2" (the spec's). The hash reads the low 32 bits of an element's index
// (the reference's index & MASK32), so callers compute indices in uint32_t, wrapping mod 2^32: the same low bits
// as 64-bit arithmetic, in one register.
HOT_HD float hash_uniform(uint32_t index, uint32_t key) {
  return uniform_of_hash(hash_of_mixed(xorshift16(index), xorshift16(key)));
}

// hot.rounding.uniform under hash "fmix32": one finaliser, half the hash's instructions.
HOT_HD float hash_uniform_single(uint32_t index, uint32_t key) {
  return uniform_of_hash(hash_single_of_mixed(xorshift16(index), xorshift16(key)));
}

// A rounding call's key and its hash (HashKey.rounds: 2 for "fmix32x2", 1 for "fmix32").
struct Dither {
  uint32_t key;
  uint32_t rounds;
};

HOT_HD float hash_uniform(uint32_t index, Dither d) {
  return d.rounds == 1u ? hash_uniform_single(index, d.key) : hash_uniform(index, d.key);
}

// The larger of two magnitudes (fabsf results, or maxima of them), a NaN winning: such floats order as their
// bits, and a NaN's (sign cleared) lie above +inf's. fmaxf would drop the NaN and leave a finite scale.
HOT_HD float amax_of(float a, float b) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(max(__float_as_uint(a), __float_as_uint(b)));
#else
  uint32_t ua, ub;
  std::memcpy(&ua, &a, sizeof ua);
  std::memcpy(&ub, &b, sizeof ub);
  return ua > ub ? a : b;
#endif
}

// absmax_scale: amax / qmax, or 1 for an all-zero group; a NaN or infinite amax gives a non-finite scale, so a
// non-finite g_y makes the gradients non-finite.
HOT_HD float absmax_to_scale(float amax, int qmax) {
  return amax == 0.0f ? 1.0f : div_rn(amax, static_cast<float>(qmax));
}

// hot.quant.sawb_scale from per-block partial sums, (sum b², sum |b|, max |b|) triples, folded as one warp folds
// them: lane l takes triples l, l + 32, l + 64, ... in index order (sawb_lane_sum, sawb_lane_max), then the 32 lane
// results meet in an xor butterfly (lane l adds lane l ^ o's, o = 16, 8, 4, 2, 1: the kernels' warp_sum). IEEE
// addition commutes, so every lane ends with the same bits, and the order is fixed: the same bits on every run. The
// sums are in double, then combined by sawb_scale_from_sums. 13 dependent additions, where index order took one
// per CTA of the statistics pass (up to 256) on the weight code pass's critical path.
constexpr int kSawbBlocks = 256;  // the statistics pass's most CTAs: the most triples
constexpr int kSawbLanes = 32;
constexpr int kSawbPerLane = kSawbBlocks / kSawbLanes;
static_assert(kSawbBlocks % kSawbLanes == 0, "every lane takes the same number of triples");

// Component `component` of lane `lane`'s triples (0 past count), every load issued before the first use: on the
// device one L2 round trip, where loads interleaved with the additions waited one each.
HOT_HD void sawb_lane_values(const double* partials, int count, int component, int lane,
                             double (&v)[kSawbPerLane]) {
#pragma unroll
  for (int k = 0; k < kSawbPerLane; ++k) {
    const int i = lane + k * kSawbLanes;
    v[k] = i < count ? partials[3 * i + component] : 0.0;
  }
}

// Component 0 (sum b²) or 1 (sum |b|) of a lane's triples (sawb_lane_values), added in index order (adding the
// 0s past count changes nothing: the sums are not negative).
HOT_HD double sawb_lane_sum(const double (&v)[kSawbPerLane]) {
  double s = 0.0;
#pragma unroll
  for (int k = 0; k < kSawbPerLane; ++k) s += v[k];
  return s;
}

// Component 2 (max |b|) of a lane's triples: amax_of's max, a NaN winning (hot.quant.sawb_scale's amax).
HOT_HD float sawb_lane_max(const double (&v)[kSawbPerLane]) {
  float amax = 0.0f;
#pragma unroll
  for (int k = 0; k < kSawbPerLane; ++k) amax = amax_of(amax, static_cast<float>(v[k]));
  return amax;
}

// The warp's fold of component 0 or 1 on one thread, addition for addition (the CPU test's model of the kernel).
inline double sawb_partial_sum(const double* partials, int count, int component) {
  double lanes[kSawbLanes], next[kSawbLanes];
  for (int l = 0; l < kSawbLanes; ++l) {
    double v[kSawbPerLane];
    sawb_lane_values(partials, count, component, l, v);
    lanes[l] = sawb_lane_sum(v);
  }
  for (int o = kSawbLanes / 2; o > 0; o /= 2) {
    for (int l = 0; l < kSawbLanes; ++l) next[l] = lanes[l] + lanes[l ^ o];
    std::memcpy(lanes, next, sizeof lanes);
  }
  return lanes[0];
}

// Component 2 folded on one thread: a max of magnitudes is the same in any order.
inline float sawb_partial_max(const double* partials, int count) {
  float amax = 0.0f;
  for (int l = 0; l < kSawbLanes; ++l) {
    double v[kSawbPerLane];
    sawb_lane_values(partials, count, 2, l, v);
    amax = amax_of(amax, sawb_lane_max(v));
  }
  return amax;
}

// 4-bit SAWB clip 12.1·sqrt(mean b²) − 12.2·mean |b| (max |b| if that is ≤ 0), with torch's float32 mean (float32
// sum / N); the 8-bit clip is max |b|.
HOT_HD float sawb_scale_from_sums(double s2, double s1, float amax, double numel, bool sawb4, int qmax) {
  float clip = amax;
  if (sawb4) {
    const float n = static_cast<float>(numel);
    const float mean2 = div_rn(static_cast<float>(s2), n), mean1 = div_rn(static_cast<float>(s1), n);
    clip = sub_rn(mul_rn(12.1f, sqrt_rn(mean2)), mul_rn(12.2f, mean1));
    clip = clip > 0.0f ? clip : amax;
  }
  return clip > 0.0f ? div_rn(clip, static_cast<float>(qmax)) : 1.0f;
}

HOT_HD float clamp_code(float q, int qmax) {
  return fminf(fmaxf(q, -static_cast<float>(qmax)), static_cast<float>(qmax));
}

// q = floor(v / s + u), clamped, as an integer-valued float (the e4m3 conversion takes it directly).
HOT_HD float stochastic_code_value(float v, const Scale& scale, float u, int qmax) {
  return clamp_code(floorf(add_rn(div_scale(v, scale), u)), qmax);
}

HOT_HD int8_t stochastic_code(float v, const Scale& scale, float u, int qmax) {
  return static_cast<int8_t>(stochastic_code_value(v, scale, u, qmax));
}

HOT_HD int8_t nearest_code(float v, const Scale& scale, int qmax) {
  return static_cast<int8_t>(clamp_code(rintf(div_scale(v, scale)), qmax));  // torch.round: half to even
}

// clamp_code(floor(x)) as the bits of a float: clamping first gives the same integer (the bounds are integers; NaN
// becomes -qmax either way). On the device the floor is one FADD rounding down against 1.5·2^23, exact for
// |x| ≤ 2^22 (that binade's ulp is 1), in place of FRND and F2I on the conversion pipe, which runs at an eighth of
// the FADD rate: the float's bits are then 0x4B400000 + code, so their low byte is the code's int8 byte. −0 comes
// out as +0 (a stochastic x is never −0: RN(q + u) with u ≥ 0 is +0 at q = ±0).
HOT_HD float floor_code_biased(float x, int qmax) {
#ifdef __CUDA_ARCH__
  return __fadd_rd(clamp_code(x, qmax), 12582912.0f);
#else
  return floorf(clamp_code(x, qmax)) + 12582912.0f;  // exact: |code| <= 127
#endif
}

// clamp_code(rint(x)) biased as floor_code_biased: one FADD to nearest against 1.5·2^23 rounds half to even, as
// rintf (and torch.round) do; −0 comes out as +0, the same int8 byte.
HOT_HD float round_code_biased(float x, int qmax) { return add_rn(clamp_code(x, qmax), 12582912.0f); }

// The integer-valued float and the int8 byte of a biased code.
HOT_HD float biased_code_value(float biased) { return sub_rn(biased, 12582912.0f); }

HOT_HD uint8_t biased_code_byte(float biased) {
#ifdef __CUDA_ARCH__
  return static_cast<uint8_t>(__float_as_uint(biased) & 0xFFu);
#else
  uint32_t bits;
  std::memcpy(&bits, &biased, sizeof bits);
  return static_cast<uint8_t>(bits & 0xFFu);
#endif
}

// |v|'s bits times 2, minus 1, unsigned: 0xFFFFFFFF at ±0 and below kTinyKey exactly where 0 < |v| < 2^-100 (whose
// bits are 0x0D800000), so the least key of a group says whether it holds such a value (one IMAD an element).
constexpr uint32_t kTinyKey = 0x0D800000u * 2u - 1u;

HOT_HD uint32_t tiny_key(float v) {
  uint32_t bits;
#ifdef __CUDA_ARCH__
  bits = __float_as_uint(v);
#else
  std::memcpy(&bits, &v, sizeof bits);
#endif
  return bits * 2u - 1u;
}

// v / s for N values under one scale, correctly rounded, as div_scale. The scale must be an absmax scale of values
// including these (|v| <= qmax·s, as every quantiser's is), so each quotient stays near qmax and Markstein's q is
// exact unless a value lies below 2^-100 (or s or r is not finite): one test for the group, whose rare failures take
// IEEE division for all N. At v = ±0 Markstein gives +0 for −0, which no code tells apart (−0 + u and +0 + u are
// equal for every u >= 0; nearest codes are integers).
template <int N>
HOT_HD void group_quotients(const float (&v)[N], const Scale& sc, float (&q)[N]) {
  uint32_t least = 0xFFFFFFFFu;
#pragma unroll
  for (int k = 0; k < N; ++k) {
    q[k] = markstein(v[k], mul_rn(v[k], sc.r), sc);
    const uint32_t t = tiny_key(v[k]);
    least = t < least ? t : least;
  }
  if (!(finite_scale(sc) && least >= kTinyKey)) {
#pragma unroll
    for (int k = 0; k < N; ++k) q[k] = div_rn(v[k], sc.s);
  }
}

// N stochastic codes under one absmax scale (group_quotients), biased (floor_code_biased), code k's u drawn at the
// index whose xorshift16 is mixed[k]. The hash is chosen once for the group (a branch the warp takes together), not
// per code: a per-code choice would issue both hashes' instructions.
template <int N>
HOT_HD void stochastic_codes_of_mixed(const float (&v)[N], const Scale& sc, const uint32_t (&mixed)[N], Dither d,
                                      int qmax, float (&biased)[N]) {
  float q[N];
  group_quotients<N>(v, sc, q);
  const uint32_t key_x = xorshift16(d.key);
  if (d.rounds == 1u) {
#pragma unroll
    for (int k = 0; k < N; ++k) {
      biased[k] = floor_code_biased(add_uniform_of_hash(q[k], hash_single_of_mixed(mixed[k], key_x)), qmax);
    }
  } else {
#pragma unroll
    for (int k = 0; k < N; ++k) {
      biased[k] = floor_code_biased(add_uniform_of_hash(q[k], hash_of_mixed(mixed[k], key_x)), qmax);
    }
  }
}

// The same codes as stochastic_code, element by element, u of element k drawn at index + k·stride.
template <int N>
HOT_HD void stochastic_codes_biased(const float (&v)[N], const Scale& sc, uint32_t index, uint32_t stride,
                                    Dither d, int qmax, float (&biased)[N]) {
  uint32_t mixed[N];
#pragma unroll
  for (int k = 0; k < N; ++k) mixed[k] = xorshift16(index + static_cast<uint32_t>(k) * stride);
  stochastic_codes_of_mixed<N>(v, sc, mixed, d, qmax, biased);
}

// The same for a run, u of element k drawn at index + k, from an index that is a multiple of N (N <= 16): adding
// k < N sets only the index's zero low bits, below bit 16, so xorshift16(index + k) = xorshift16(index) ^ k.
template <int N>
HOT_HD void stochastic_run_codes_biased(const float (&v)[N], const Scale& sc, uint32_t index, Dither d, int qmax,
                                        float (&biased)[N]) {
  static_assert(N >= 1 && N <= 16 && (N & (N - 1)) == 0, "a run is a power of two of at most 16 codes");
  const uint32_t first = xorshift16(index);
  uint32_t mixed[N];
#pragma unroll
  for (int k = 0; k < N; ++k) mixed[k] = first ^ static_cast<uint32_t>(k);
  stochastic_codes_of_mixed<N>(v, sc, mixed, d, qmax, biased);
}

// The e4m3 byte of an integer-valued float code (every integer in -16..16 is exact in e4m3).
HOT_HD uint8_t e4m3_of_code(float q) {
  return static_cast<uint8_t>(__nv_cvt_float_to_fp8(q, __NV_SATFINITE, __NV_E4M3));
}

// Two codes' e4m3 bytes at once (low byte: a), one conversion instruction on sm_89+.
HOT_HD uint16_t e4m3x2_of_codes(float a, float b) {
  return static_cast<uint16_t>(__nv_cvt_float2_to_fp8x2(make_float2(a, b), __NV_SATFINITE, __NV_E4M3));
}

}  // namespace hot
