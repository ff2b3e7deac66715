// Host driver of kernels/csrc/quant_scalar.cuh for tests/kernels/test_quant_scalar.py: `quant_scalar_host OP`
// reads OP's packed little-endian inputs on stdin and writes its packed results on stdout.
//   uniform    key u32, rounds u32, n u64, n indices u64 -> n f32   hash_uniform of Dither{key, rounds}
//   hash_key   n u64, n (seed, layer, step, stream, rank) u32 quintuples -> n u32   hash_key
//   stochastic qmax i32, n u64, n (v, s, u) f32 triples -> n i8    stochastic_code, then n f32 stochastic_code_value
//   nearest    qmax i32, n u64, n (v, s) f32 pairs      -> n i8    nearest_code
//   stochastic_group  qmax i32, key u32, rounds u32, stride u32, n u64, n groups of (s f32, index u32, 16 v f32)
//                                                       -> 16n i8, 16n f32, 16n f32: stochastic_codes_biased<16>
//                                                          (u of element k at index + k * stride; stride 0: a
//                                                          run, stochastic_run_codes_biased<16>, u at index + k
//                                                          from an index a multiple of 16; stride 0xFFFFFFFF: four
//                                                          runs of 4, stochastic_run_codes_biased<4> from index,
//                                                          index + 4, ..., index a multiple of 4), its bytes and
//                                                          values, group_quotients<16>, then 16n i8 of
//                                                          round_code_biased of those quotients
//   scale      qmax i32, n u64, n amax f32              -> n f32   absmax_to_scale
//   divide     n u64, n (v, s) f32 pairs                -> n f32   div_scale(v, scale_of(s))
//   amax       n u64, n magnitudes f32                  -> 1 f32   amax_of folded over them, from 0
//   e4m3       n u64 (even), n codes f32                -> n u8    e4m3_of_code, then n u8 from e4m3x2_of_codes
//   sawb       qmax i32, sawb4 i32, numel f64, n u64, n (sum b², sum |b|, max |b|) f64 triples
//                                                       -> 1 f32   sawb_scale_from_sums of sawb_partial_sum
//                                                          (components 0, 1) and sawb_partial_max
//   sawb_fold  n u64, n (sum b², sum |b|, max |b|) f64 triples
//                                                       -> 2 f64, 1 f32   sawb_partial_sum of components 0, 1,
//                                                          sawb_partial_max
//   windows    tokens, prefix, height, width, window_w, samples, rank i64
//                                                       -> units, proj_rows i64, then per unit: first projected
//                                                          row, row count, 16 slot rows (-1: padding) i64
//                                                          (hla_shape, hla_unit_at, hla_slots, hla_slot,
//                                                          hla_unit_rows); exits 3 if a unit's element offsets
//                                                          for 7 channels are not 7 times its row offsets
//   fastdiv    n u64, n (numerator, divisor) i64 pairs  -> n u32   quotient(numerator, fast_div(divisor)), then
//                                                          n u32 remainders, numerator - quotient * divisor.d
//   paper_rows (no input)                               -> kPaperRank i32: kPaperRows
#include "hla_windows.cuh"
#include "quant_scalar.cuh"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

template <typename T>
T read_one() {
  T value;
  if (std::fread(&value, sizeof(T), 1, stdin) != 1) {
    std::fprintf(stderr, "quant_scalar_host: short input\n");
    std::exit(2);
  }
  return value;
}

template <typename T>
std::vector<T> read_many(uint64_t n) {
  std::vector<T> values(n);
  if (n && std::fread(values.data(), sizeof(T), n, stdin) != n) {
    std::fprintf(stderr, "quant_scalar_host: short input\n");
    std::exit(2);
  }
  return values;
}

template <typename T>
void write_many(const std::vector<T>& values) {
  std::fwrite(values.data(), sizeof(T), values.size(), stdout);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: quant_scalar_host uniform|hash_key|stochastic|stochastic_group|nearest|divide|scale|amax|e4m3|sawb|windows < input\n");
    return 2;
  }
  const char* op = argv[1];
  if (!std::strcmp(op, "uniform")) {
    const auto key = read_one<uint32_t>();
    const auto rounds = read_one<uint32_t>();
    const auto index = read_many<uint64_t>(read_one<uint64_t>());
    std::vector<float> u(index.size());
    // the kernels' indices are uint32_t, wrapping mod 2^32: the low 32 bits of the 64-bit index
    for (size_t i = 0; i < index.size(); ++i) u[i] = hot::hash_uniform(static_cast<uint32_t>(index[i]), hot::Dither{key, rounds});
    write_many(u);
  } else if (!std::strcmp(op, "hash_key")) {
    const auto n = read_one<uint64_t>();
    const auto parts = read_many<uint32_t>(5 * n);
    std::vector<uint32_t> keys(n);
    for (uint64_t i = 0; i < n; ++i) {
      const uint32_t* p = &parts[5 * i];
      keys[i] = hot::hash_key(p[0], p[1], p[2], p[3], p[4]);
    }
    write_many(keys);
  } else if (!std::strcmp(op, "stochastic") || !std::strcmp(op, "nearest")) {
    const bool stochastic = op[0] == 's';
    const auto qmax = read_one<int32_t>();
    const auto n = read_one<uint64_t>();
    const auto in = read_many<float>(n * (stochastic ? 3 : 2));
    std::vector<int8_t> codes(n);
    std::vector<float> values(stochastic ? n : 0);
    for (uint64_t i = 0; i < n; ++i) {
      if (stochastic) {
        const float v = in[3 * i], s = in[3 * i + 1], u = in[3 * i + 2];
        codes[i] = hot::stochastic_code(v, hot::scale_of(s), u, qmax);
        values[i] = hot::stochastic_code_value(v, hot::scale_of(s), u, qmax);
      } else {
        codes[i] = hot::nearest_code(in[2 * i], hot::scale_of(in[2 * i + 1]), qmax);
      }
    }
    write_many(codes);
    write_many(values);
  } else if (!std::strcmp(op, "stochastic_group")) {
    const auto qmax = read_one<int32_t>();
    const auto key = read_one<uint32_t>();
    const auto rounds = read_one<uint32_t>();
    const auto stride = read_one<uint32_t>();
    const auto n = read_one<uint64_t>();
    std::vector<int8_t> codes(16 * n);
    std::vector<float> values(16 * n), quotients(16 * n);
    std::vector<int8_t> nearest(16 * n);
    for (uint64_t g = 0; g < n; ++g) {
      const auto s = read_one<float>();
      const auto index = read_one<uint32_t>();
      const auto in = read_many<float>(16);
      float v[16], biased[16], q[16];
      for (int k = 0; k < 16; ++k) v[k] = in[k];
      if (stride == 0) {
        if (index % 16 != 0) {
          std::fprintf(stderr, "a run's index must be a multiple of 16, got %u\n", index);
          return 2;
        }
        hot::stochastic_run_codes_biased<16>(v, hot::scale_of(s), index, hot::Dither{key, rounds}, qmax, biased);
      } else if (stride == 0xFFFFFFFFu) {
        if (index % 4 != 0) {
          std::fprintf(stderr, "a run of 4's index must be a multiple of 4, got %u\n", index);
          return 2;
        }
        for (int r = 0; r < 4; ++r) {
          float part[4], part_biased[4];
          for (int k = 0; k < 4; ++k) part[k] = v[4 * r + k];
          hot::stochastic_run_codes_biased<4>(part, hot::scale_of(s), index + 4u * r, hot::Dither{key, rounds}, qmax,
                                             part_biased);
          for (int k = 0; k < 4; ++k) biased[4 * r + k] = part_biased[k];
        }
      } else {
        hot::stochastic_codes_biased<16>(v, hot::scale_of(s), index, stride, hot::Dither{key, rounds}, qmax, biased);
      }
      hot::group_quotients<16>(v, hot::scale_of(s), q);
      for (int k = 0; k < 16; ++k) {
        codes[16 * g + k] = static_cast<int8_t>(hot::biased_code_byte(biased[k]));
        values[16 * g + k] = hot::biased_code_value(biased[k]);
        quotients[16 * g + k] = q[k];
        nearest[16 * g + k] = static_cast<int8_t>(hot::biased_code_byte(hot::round_code_biased(q[k], qmax)));
      }
    }
    write_many(codes);
    write_many(values);
    write_many(quotients);
    write_many(nearest);
  } else if (!std::strcmp(op, "divide")) {
    const auto n = read_one<uint64_t>();
    const auto in = read_many<float>(2 * n);
    std::vector<float> quotient(n);
    for (uint64_t i = 0; i < n; ++i) quotient[i] = hot::div_scale(in[2 * i], hot::scale_of(in[2 * i + 1]));
    write_many(quotient);
  } else if (!std::strcmp(op, "scale")) {
    const auto qmax = read_one<int32_t>();
    const auto amax = read_many<float>(read_one<uint64_t>());
    std::vector<float> scale(amax.size());
    for (size_t i = 0; i < amax.size(); ++i) scale[i] = hot::absmax_to_scale(amax[i], qmax);
    write_many(scale);
  } else if (!std::strcmp(op, "amax")) {
    const auto values = read_many<float>(read_one<uint64_t>());
    std::vector<float> amax{0.0f};
    for (const float v : values) amax[0] = hot::amax_of(amax[0], v);
    write_many(amax);
  } else if (!std::strcmp(op, "e4m3")) {
    const auto codes = read_many<float>(read_one<uint64_t>());
    std::vector<uint8_t> one(codes.size()), pairs(codes.size());
    for (size_t i = 0; i < codes.size(); ++i) one[i] = hot::e4m3_of_code(codes[i]);
    for (size_t i = 0; i + 1 < codes.size(); i += 2) {
      const uint16_t pair = hot::e4m3x2_of_codes(codes[i], codes[i + 1]);
      pairs[i] = static_cast<uint8_t>(pair & 0xFFu);
      pairs[i + 1] = static_cast<uint8_t>(pair >> 8);
    }
    write_many(one);
    write_many(pairs);
  } else if (!std::strcmp(op, "sawb")) {
    const auto qmax = read_one<int32_t>();
    const auto sawb4 = read_one<int32_t>() != 0;
    const auto numel = read_one<double>();
    const auto count = read_one<uint64_t>();
    const auto partials = read_many<double>(3 * count);
    // the three folds and their combination, as each CTA of the weight quantiser runs them
    const double* p = partials.data();
    const int n = static_cast<int>(count);
    const double s2 = hot::sawb_partial_sum(p, n, 0), s1 = hot::sawb_partial_sum(p, n, 1);
    const std::vector<float> scale{hot::sawb_scale_from_sums(s2, s1, hot::sawb_partial_max(p, n), numel, sawb4, qmax)};
    write_many(scale);
  } else if (!std::strcmp(op, "sawb_fold")) {
    const auto count = read_one<uint64_t>();
    const auto partials = read_many<double>(3 * count);
    const int n = static_cast<int>(count);
    write_many(std::vector<double>{hot::sawb_partial_sum(partials.data(), n, 0),
                                   hot::sawb_partial_sum(partials.data(), n, 1)});
    write_many(std::vector<float>{hot::sawb_partial_max(partials.data(), n)});
  } else if (!std::strcmp(op, "windows")) {
    const auto in = read_many<int64_t>(7);
    const hot::HlaWindows w{in[0], in[1], in[2], in[3], static_cast<int>(in[4])};
    const hot::HlaShape sh = hot::hla_shape(in[5] * w.tokens, 1, w, static_cast<int>(in[6]));
    std::vector<int64_t> out{sh.sblocks, sh.proj_rows};
    for (int64_t sb = 0; sb < sh.sblocks; ++sb) {
      int64_t row0;
      const int count = hot::hla_unit_rows(sh, sb, row0);
      out.push_back(row0);
      out.push_back(count);
      const hot::HlaUnit u = hot::hla_unit_at(sh, sb);
      // The kernels' slot offsets from the unit's first row: in rows (stride 1), and in elements of a tensor of
      // 7 channels, which must be the same slots 7 elements a row.
      const hot::HlaSlots rows = hot::hla_slots(sh, u, 1u), elements = hot::hla_slots(sh, u, 7u);
      for (int k = 0; k < hot::kHlaSlots; ++k) {
        uint32_t row, element;
        const bool inside = hot::hla_slot(rows, k, row);
        if (hot::hla_slot(elements, k, element) != inside || (inside && element != 7u * row)) {
          std::fprintf(stderr, "quant_scalar_host: unit %lld slot %d: element offset %u, row offset %u\n",
                       static_cast<long long>(sb), k, element, row);
          return 3;
        }
        out.push_back(inside ? u.first + static_cast<int64_t>(row) : -1);
      }
    }
    write_many(out);
  } else if (!std::strcmp(op, "paper_rows")) {
    write_many(std::vector<int32_t>(hot::kPaperRows, hot::kPaperRows + hot::kPaperRank));
  } else if (!std::strcmp(op, "fastdiv")) {
    const auto n = read_one<uint64_t>();
    const auto pairs = read_many<int64_t>(2 * n);
    std::vector<uint32_t> out(n), rest(n);
    for (uint64_t i = 0; i < n; ++i) {
      const auto numerator = static_cast<uint32_t>(pairs[2 * i]);
      const hot::FastDiv divisor = hot::fast_div(pairs[2 * i + 1]);
      out[i] = hot::quotient(numerator, divisor);
      rest[i] = numerator - out[i] * divisor.d;
    }
    write_many(out);
    write_many(rest);
  } else {
    std::fprintf(stderr, "quant_scalar_host: unknown op %s\n", op);
    return 2;
  }
  return 0;
}
