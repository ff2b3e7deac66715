// Where HLA's 16-slot units read a tensor of samples (hot.hla.HLAWindows), and which projected rows they write.
// Index arithmetic only, host and device: tests/kernels/test_quant_scalar.py compiles it for the CPU and checks
// every unit's rows and slots against the PyTorch reference's index map and row order.
#pragma once

#include "hot_kernels.h"
#include "quant_scalar.cuh"

#include <cstdint>

namespace hot {

// n / d for 0 <= n < 2^31 and an invariant 1 <= d <= 2^31 as a multiply-high, an add and a shift (Granlund and
// Montgomery, "Division by invariant integers using multiplication", 1994): with l = ceil(log2 d) and
// m = floor(2^32 (2^l - d) / d) + 1, n / d = (mulhi(n, m) + n) >> l, where mulhi(n, m) < n keeps the sum below
// 2^32. The kernels divide block and unit numbers (below 2^31: a grid's x extent) by the shape's tile and window
// counts once a thread; a 32-bit division is about 20 instructions, a 64-bit one a call.
struct FastDiv {
  uint32_t d, m;  // the divisor (at least 1: remainders are n - quotient * d) and the multiplier
  int l;
};

inline FastDiv fast_div(int64_t d) {
  d = d < 1 ? 1 : d;  // a count of 0 (no prefix rows) divides nothing
  int l = 0;
  while ((int64_t{1} << l) < d) ++l;
  const uint64_t m = (uint64_t{1} << 32) * ((uint64_t{1} << l) - static_cast<uint64_t>(d)) / static_cast<uint64_t>(d);
  return FastDiv{static_cast<uint32_t>(d), static_cast<uint32_t>(m + 1u), l};
}

HOT_HD uint32_t quotient(uint32_t n, const FastDiv& f) {
#ifdef __CUDA_ARCH__
  const uint32_t hi = __umulhi(n, f.m);
#else
  const auto hi = static_cast<uint32_t>(static_cast<uint64_t>(n) * f.m >> 32);
#endif
  return (hi + n) >> f.l;
}

// The paper's kept rows of H_16 (rank 8, hot.hla.lp_l1_rows(8) in its order; a CPU test compares), which the HLA
// kernels are also compiled for as constants. Other rows take the same kernels with rows read at run time.
constexpr int kPaperRank = 8;
constexpr int kPaperRows[kPaperRank] = {0, 2, 8, 10, 3, 12, 11, 14};

// A sample's T rows: `prefix` rows, then a height x width raster grid cut into windows of win_h x win_w slots
// (win_w = 1 << win_shift), zero-padded. The units are first every sample's windows (sample-major; unit u writes
// projected rows u*rank ..), then every sample's prefix rows (one row each, after all window rows): the row
// order of hla_project.
struct HlaShape {
  int64_t channels, tokens;
  int64_t prefix, height, width;
  int win_shift;          // log2 of the window's width
  int64_t win_h, win_w;   // window rows and columns
  int64_t win_cols;       // windows along a grid row
  int64_t windows;        // windows per sample
  int64_t window_units;   // samples * windows
  int64_t sblocks;        // units: window_units + samples * prefix
  int64_t window_rows;    // window_units * rank: the first prefix row
  int64_t proj_rows;      // window_rows + samples * prefix
  int64_t codes_pitch;    // hla_codes_pitch(proj_rows): codes_t's row pitch
  int rank;
  int64_t tiles_c;  // channel tiles per row of tiles (set by the launcher: hla_set_tiles)
  FastDiv by_tiles_c, by_windows, by_win_cols, by_prefix;
};

// The launcher's channel tiles of `cols` channels each: tiles_c and its divider.
inline void hla_set_tiles(HlaShape& sh, int64_t cols) {
  sh.tiles_c = (sh.channels + cols - 1) / cols;
  sh.by_tiles_c = fast_div(sh.tiles_c);
}

// window_w is 4 (4x4 windows) or 16 (1x16 strips of a 1-row grid); the bindings check it.
inline HlaShape hla_shape(int64_t length, int64_t channels, const HlaWindows& w, int rank) {
  HlaShape sh{};
  const int64_t samples = length / w.tokens;
  sh.channels = channels;
  sh.tokens = w.tokens;
  sh.prefix = w.prefix;
  sh.height = w.height;
  sh.width = w.width;
  sh.win_w = w.window_w;
  sh.win_h = kHlaSlots / w.window_w;
  sh.win_shift = w.window_w == 4 ? 2 : 4;
  sh.win_cols = (w.width + sh.win_w - 1) / sh.win_w;
  sh.windows = (w.height + sh.win_h - 1) / sh.win_h * sh.win_cols;
  sh.window_units = samples * sh.windows;
  sh.sblocks = sh.window_units + samples * w.prefix;
  sh.window_rows = sh.window_units * rank;
  sh.proj_rows = sh.window_rows + samples * w.prefix;
  sh.codes_pitch = hla_codes_pitch(sh.proj_rows);
  sh.rank = rank;
  sh.by_windows = fast_div(sh.windows);
  sh.by_win_cols = fast_div(sh.win_cols);
  sh.by_prefix = fast_div(sh.prefix);
  return sh;
}

// Where unit sb reads: the row of the tensor at its slot (0, 0), and how many of its slot rows and columns lie
// inside the sample (a prefix unit: slot 0 only).
struct HlaUnit {
  int64_t first;
  int rows_in, cols_in;
  bool prefix;
};

// sb below sblocks (below 2^31: the bindings' launch bounds), so the divisions are 32-bit ones.
HOT_HD HlaUnit hla_unit_at(const HlaShape& sh, int64_t sb) {
  if (sb < sh.window_units) {
    const uint32_t n = static_cast<uint32_t>(sb), sample = quotient(n, sh.by_windows);
    const uint32_t w = n - sample * static_cast<uint32_t>(sh.windows), wr = quotient(w, sh.by_win_cols);
    const int64_t r0 = wr * sh.win_h, c0 = (w - wr * static_cast<uint32_t>(sh.win_cols)) * sh.win_w;
    const int64_t rows = sh.height - r0 < sh.win_h ? sh.height - r0 : sh.win_h;
    const int64_t cols = sh.width - c0 < sh.win_w ? sh.width - c0 : sh.win_w;
    return HlaUnit{static_cast<int64_t>(sample) * sh.tokens + sh.prefix + r0 * sh.width + c0, static_cast<int>(rows),
                   static_cast<int>(cols), false};
  }
  const uint32_t p = static_cast<uint32_t>(sb - sh.window_units), sample = quotient(p, sh.by_prefix);
  return HlaUnit{static_cast<int64_t>(sample) * sh.tokens + (p - sample * static_cast<uint32_t>(sh.prefix)), 1, 1,
                 true};
}

// How a unit's 16 slots read, as 32-bit offsets from its slot (0, 0) in rows of `stride` elements. Every slot
// inside the sample lies in the unit's sample, so its offset is below tokens * stride, which the bindings check
// is below 2^31 for stride = channels. Unsigned: a padding slot's offset (never used) may wrap.
struct HlaSlots {
  uint32_t quad_step;  // slot k to slot k + 4: one window row down (4x4 windows) or 4 columns on (1x16 strips)
  uint32_t col_step;   // slot k to slot k + 1 within a group of 4: one column on (stride)
  uint32_t inside;     // bit k set when slot k lies inside the sample
};

// Slot k is row k >> win_shift, column k & (win_w - 1) of the unit's window (win_w 4 or 16). Both kinds have
// slots k and k + 4 one quad step apart and the 4 slots of a group adjacent, so slot k's offset is
// (k >> 2) * quad_step + (k & 3) * col_step: constants times the two steps once k is unrolled.
HOT_HD HlaSlots hla_slots(const HlaShape& sh, const HlaUnit& u, uint32_t stride) {
  const uint32_t row = (1u << u.cols_in) - 1u;                    // a window row's inside slots (cols_in <= win_w)
  const uint32_t rows = sh.win_shift == 2 ? row * 0x1111u : row;  // on each of the 4 rows of a 4x4 window
  const uint32_t quad = sh.win_shift == 2 ? static_cast<uint32_t>(sh.width) : 4u;
  return HlaSlots{quad * stride, stride, rows & ((1u << (u.rows_in << sh.win_shift)) - 1u)};
}

// Slot k: whether it is inside the sample, and its offset from the unit's slot (0, 0) (u.first's row).
HOT_HD bool hla_slot(const HlaSlots& s, int k, uint32_t& offset) {
  offset = static_cast<uint32_t>(k >> 2) * s.quad_step + static_cast<uint32_t>(k & 3) * s.col_step;
  return (s.inside & (1u << k)) != 0u;
}

// The projected rows unit sb writes: its first (through row0) and how many (rank for a window, 1 for a prefix
// token, whose kept rows all hold the same value).
HOT_HD int hla_unit_rows(const HlaShape& sh, int64_t sb, int64_t& row0) {
  if (sb < sh.window_units) {
    row0 = sb * sh.rank;
    return sh.rank;
  }
  row0 = sh.window_rows + (sb - sh.window_units);
  return 1;
}

}  // namespace hot
