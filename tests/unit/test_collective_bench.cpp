// The collective benchmark's pure parts: busbw factors, size rules, exact expected values, the
// #wrong checker against an independent host model of every collective, and the roof fits.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "collectives/collective_bench.hpp"
#include "collectives/half_types.hpp"
#include "collectives/ipc_allreduce.hpp"
#include "core/error.hpp"

namespace ridgeline {
namespace {

const CollectiveSpec& spec(const char* name) {
  const CollectiveSpec* s = find_collective(name);
  EXPECT_NE(s, nullptr) << name;
  return *s;
}

// `value` rounded to `dtype` (as the device would store it).
double in_dtype(DType dtype, double value) {
  switch (dtype) {
  case DType::f32:
    return static_cast<float>(value);
  case DType::bf16:
    return bf16_to_float(float_to_bf16(static_cast<float>(value)));
  case DType::f16:
    return f16_to_float(float_to_f16(static_cast<float>(value)));
  case DType::i32:
    return static_cast<double>(static_cast<int32_t>(value));
  }
  return value;
}

TEST(CollectiveBench, RegistryHasEveryCollectiveOnce) {
  const char* names[] = {"all_reduce", "all_gather", "reduce_scatter", "all_to_all",
                         "broadcast",  "reduce",     "sendrecv"};
  ASSERT_EQ(collective_registry().size(), 7u);
  for (size_t i = 0; i < 7; ++i)
    EXPECT_STREQ(collective_registry()[i].name, names[i]);
  EXPECT_EQ(find_collective("allreduce"), nullptr);
}

TEST(CollectiveBench, BusbwFactorsMatchNcclTests) {
  // Hand-computed: 2(n-1)/n, (n-1)/n and 1 at n = 2, 4, 8.
  EXPECT_DOUBLE_EQ(spec("all_reduce").busbw_factor(2), 1.0);
  EXPECT_DOUBLE_EQ(spec("all_reduce").busbw_factor(4), 1.5);
  EXPECT_DOUBLE_EQ(spec("all_reduce").busbw_factor(8), 1.75);
  for (const char* name : {"all_gather", "reduce_scatter", "all_to_all"}) {
    EXPECT_DOUBLE_EQ(spec(name).busbw_factor(2), 0.5) << name;
    EXPECT_DOUBLE_EQ(spec(name).busbw_factor(4), 0.75) << name;
    EXPECT_DOUBLE_EQ(spec(name).busbw_factor(8), 0.875) << name;
  }
  for (const char* name : {"broadcast", "reduce", "sendrecv"})
    EXPECT_DOUBLE_EQ(spec(name).busbw_factor(4), 1.0) << name;
}

TEST(CollectiveBench, AlgbwAndBusbw) {
  // 1 GiB in 10 ms: 107.374 GB/s algbw; all-reduce over 4 ranks: x 1.5.
  const double bytes = 1073741824.0;
  EXPECT_NEAR(algbw_gbps(bytes, 1e7), 107.3741824, 1e-9);
  EXPECT_NEAR(busbw_gbps(spec("all_reduce"), 4, bytes, 1e7), 161.0612736, 1e-9);
  EXPECT_NEAR(busbw_gbps(spec("all_gather"), 4, bytes, 1e7), 80.5306368, 1e-9);
  EXPECT_NEAR(busbw_gbps(spec("sendrecv"), 2, 4096, 1000), 4.096, 1e-12);
}

TEST(CollectiveBench, ShapesRoundLikeNcclTests) {
  // 100 B of fp32 over 4 ranks: 25 elements -> 6 per rank -> 24 elements, 96 B.
  CollectiveShape s = collective_shape(spec("all_gather"), 100, DType::f32, 4);
  EXPECT_EQ(s.count, 6u);
  EXPECT_EQ(s.send_elements, 6u);
  EXPECT_EQ(s.recv_elements, 24u);
  EXPECT_EQ(s.size_bytes, 96u);
  s = collective_shape(spec("reduce_scatter"), 100, DType::f32, 4);
  EXPECT_EQ(s.count, 6u);
  EXPECT_EQ(s.send_elements, 24u);
  EXPECT_EQ(s.recv_elements, 6u);
  EXPECT_EQ(s.size_bytes, 96u);
  s = collective_shape(spec("all_to_all"), 100, DType::f32, 4);
  EXPECT_EQ(s.count, 6u);
  EXPECT_EQ(s.send_elements, 24u);
  EXPECT_EQ(s.size_bytes, 96u);
  s = collective_shape(spec("all_reduce"), 10, DType::f32, 4);
  EXPECT_EQ(s.count, 2u);
  EXPECT_EQ(s.size_bytes, 8u);
  s = collective_shape(spec("broadcast"), 10, DType::bf16, 4);
  EXPECT_EQ(s.count, 5u);
  EXPECT_EQ(s.size_bytes, 10u);
  EXPECT_EQ(collective_shape(spec("all_gather"), 8, DType::f32, 4).count, 0u);
}

TEST(CollectiveBench, ParsesSizes) {
  EXPECT_EQ(parse_size_bytes("8", "--x"), 8u);
  EXPECT_EQ(parse_size_bytes("1K", "--x"), 1024u);
  EXPECT_EQ(parse_size_bytes("4m", "--x"), 4u << 20);
  EXPECT_EQ(parse_size_bytes("1G", "--x"), 1u << 30);
  EXPECT_EQ(parse_size_bytes("64KB", "--x"), 65536u);
  EXPECT_EQ(parse_size_bytes("2t", "--x"), size_t{2} << 40);
  for (const char* bad : {"", "0", "0K", "K", "1X", "-1", "1.5M", " 8", "1KK"})
    EXPECT_THROW(parse_size_bytes(bad, "--min-bytes"), UsageError) << bad;
  try {
    parse_size_bytes("12Q", "--max-bytes");
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("--max-bytes '12Q'"), std::string::npos);
  }
}

TEST(CollectiveBench, SweepsByFactor) {
  EXPECT_EQ(size_sweep(8, 64, 2), (std::vector<size_t>{8, 16, 32, 64}));
  EXPECT_EQ(size_sweep(8, 100, 2), (std::vector<size_t>{8, 16, 32, 64}));
  EXPECT_EQ(size_sweep(8, 20, 1.5), (std::vector<size_t>{8, 12, 18}));
  EXPECT_EQ(size_sweep(1024, 1 << 20, 2).size(), 11u);
  EXPECT_EQ(size_sweep(4, 4, 2), (std::vector<size_t>{4}));
  // A factor too small to move an integer size still advances by one byte.
  EXPECT_EQ(size_sweep(1, 3, 1.1), (std::vector<size_t>{1, 2, 3}));
  EXPECT_THROW(size_sweep(1 << 20, 1024, 2), UsageError);
  EXPECT_THROW(size_sweep(8, 64, 1.0), UsageError);
  EXPECT_THROW(size_sweep(8, 64, 0.5), UsageError);
  EXPECT_THROW(size_sweep(0, 64, 2), UsageError);
}

// Reduces in the dtype itself, rounding after every step, in descending rank order (another
// order than the checker's): exactness means the order and the rounding do not matter.
double reduce_in_dtype(DType dtype, ReduceOp op, int ranks, size_t index) {
  const CollectiveSpec& ar = spec("all_reduce");
  double acc = in_dtype(dtype, send_value(ar, op, ranks - 1, ranks, index));
  for (int r = ranks - 2; r >= 0; --r) {
    const double v = in_dtype(dtype, send_value(ar, op, r, ranks, index));
    switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg:
      acc = in_dtype(dtype, acc + v);
      break;
    case ReduceOp::prod:
      acc = in_dtype(dtype, acc * v);
      break;
    case ReduceOp::max:
      acc = std::max(acc, v);
      break;
    case ReduceOp::min:
      acc = std::min(acc, v);
      break;
    }
  }
  if (op == ReduceOp::avg)
    acc = in_dtype(dtype, dtype == DType::i32 ? std::trunc(acc / ranks) : acc / ranks);
  return acc;
}

TEST(CollectiveBench, ExpectedValuesAreExactForEverySupportedCombination) {
  int combinations = 0;
  for (DType dtype : {DType::f32, DType::bf16, DType::f16, DType::i32})
    for (ReduceOp op : {ReduceOp::sum, ReduceOp::prod, ReduceOp::max, ReduceOp::min, ReduceOp::avg})
      for (int ranks : {1, 2, 3, 4, 5, 8, 16, 64}) {
        if (!exactness_problem(dtype, op, ranks).empty()) continue;
        ++combinations;
        const CollectiveShape shape = collective_shape(spec("all_reduce"), 4000, dtype, ranks);
        const ResultChecker checker(spec("all_reduce"), shape, dtype, op, 0, 0, ranks);
        for (size_t i = 0; i < 200; ++i) {
          // Send values are small integers, exact in the dtype.
          const double v =
              send_value(spec("all_reduce"), op, static_cast<int>(i % ranks), ranks, i);
          ASSERT_EQ(in_dtype(dtype, v), v);
          ASSERT_EQ(std::trunc(v), v);
          ASSERT_EQ(checker.expected(i), reduce_in_dtype(dtype, op, ranks, i))
              << dtype_name(dtype) << " " << reduce_op_name(op) << " n=" << ranks << " i=" << i;
        }
      }
  EXPECT_GE(combinations, 130);
  // Every op is exact for every dtype at 8 ranks; the limits are stated.
  for (DType dtype : {DType::f32, DType::bf16, DType::f16, DType::i32})
    for (ReduceOp op : {ReduceOp::sum, ReduceOp::prod, ReduceOp::max, ReduceOp::min, ReduceOp::avg})
      EXPECT_EQ(exactness_problem(dtype, op, 8), "");
  EXPECT_NE(exactness_problem(DType::bf16, ReduceOp::sum, 200), "");
  EXPECT_EQ(exactness_problem(DType::bf16, ReduceOp::sum, 128), "");
  EXPECT_NE(exactness_problem(DType::bf16, ReduceOp::avg, 3), "");
  EXPECT_NE(exactness_problem(DType::f32, ReduceOp::avg, 6), "");
  EXPECT_EQ(exactness_problem(DType::i32, ReduceOp::avg, 3), "");
  EXPECT_EQ(exactness_problem(DType::bf16, ReduceOp::prod, 1000), "");
}

TEST(CollectiveBench, CopyPatternTellsRanksApart) {
  const CollectiveSpec& ag = spec("all_gather");
  for (int a = 0; a < 8; ++a)
    for (int b = a + 1; b < 8; ++b)
      EXPECT_NE(send_value(ag, ReduceOp::sum, a, 8, 5), send_value(ag, ReduceOp::sum, b, 8, 5));
}

// Independent host model of one collective: the output of `rank` from everyone's send buffers.
std::vector<double> model_output(const CollectiveSpec& s, const CollectiveShape& shape, DType dtype,
                                 ReduceOp op, int root, int rank, int n) {
  std::vector<std::vector<double>> send(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    std::vector<unsigned char> raw(shape.send_elements * dtype_size(dtype));
    fill_send_values(raw.data(), shape.send_elements, 0, s, dtype, op, r, n);
    for (size_t i = 0; i < shape.send_elements; ++i)
      send[static_cast<size_t>(r)].push_back(decode_element(raw.data(), i, dtype));
  }
  const size_t c = shape.count;
  std::vector<double> out(shape.recv_elements);
  auto reduced = [&](size_t i) {
    double acc = 0;
    for (int r = 0; r < n; ++r)
      acc += send[static_cast<size_t>(r)][i];
    return op == ReduceOp::avg ? acc / n : acc;
  };
  for (size_t j = 0; j < out.size(); ++j) {
    switch (s.id) {
    case Collective::all_reduce:
    case Collective::reduce:
      out[j] = reduced(j);
      break;
    case Collective::reduce_scatter:
      out[j] = reduced(static_cast<size_t>(rank) * c + j);
      break;
    case Collective::all_gather:
      out[j] = send[j / c][j % c];
      break;
    case Collective::all_to_all:
      out[j] = send[j / c][static_cast<size_t>(rank) * c + j % c];
      break;
    case Collective::broadcast:
      out[j] = send[static_cast<size_t>(root)][j];
      break;
    case Collective::sendrecv:
      out[j] = send[static_cast<size_t>((rank + n - 1) % n)][j];
      break;
    }
  }
  return out;
}

TEST(CollectiveBench, CheckerAgreesWithAModelAndCountsFlippedElements) {
  const int n = 3;
  const int root = 1;
  for (DType dtype : {DType::f32, DType::bf16, DType::i32})
    for (const CollectiveSpec& s : collective_registry())
      for (int rank = 0; rank < n; ++rank) {
        const CollectiveShape shape = collective_shape(s, 3000, dtype, n);
        const ResultChecker checker(s, shape, dtype, ReduceOp::sum, root, rank, n);
        if (s.id == Collective::reduce && rank != root) {
          EXPECT_FALSE(checker.has_output());
          continue;
        }
        const std::vector<double> want =
            model_output(s, shape, dtype, ReduceOp::sum, root, rank, n);
        ASSERT_EQ(checker.output_elements(), want.size());
        // The model's output, stored as the device would store it.
        std::vector<unsigned char> got(want.size() * dtype_size(dtype));
        for (size_t j = 0; j < want.size(); ++j) {
          const float f = static_cast<float>(want[j]);
          if (dtype == DType::f32) std::memcpy(&got[j * 4], &f, 4);
          if (dtype == DType::i32) {
            const auto v = static_cast<int32_t>(want[j]);
            std::memcpy(&got[j * 4], &v, 4);
          }
          if (dtype == DType::bf16) {
            const uint16_t v = float_to_bf16(f);
            std::memcpy(&got[j * 2], &v, 2);
          }
        }
        EXPECT_EQ(checker.count_wrong(got.data()), 0u) << s.name << " " << dtype_name(dtype);
        // One flipped low bit of one element is one wrong element; three are three.
        got[dtype_size(dtype) * (want.size() / 2)] ^= 1;
        EXPECT_EQ(checker.count_wrong(got.data()), 1u) << s.name << " " << dtype_name(dtype);
        got[0] ^= 1;
        got[got.size() - dtype_size(dtype)] ^= 1;
        EXPECT_EQ(checker.count_wrong(got.data()), want.size() >= 3 ? 3u : 2u) << s.name;
        // The untouched sentinel (an output never written) is wrong everywhere.
        std::vector<unsigned char> sentinel(got.size(), kSentinelByte);
        EXPECT_EQ(checker.count_wrong(sentinel.data()), want.size()) << s.name;
      }
}

TEST(CollectiveBench, FilledSendValuesMatchTheFormulaEverywhere) {
  // Filling copies whole periods: check every element against send_value at an offset start
  // and a length that is no multiple of any period.
  const size_t elements = 100003, first = 17;
  for (DType dtype : {DType::bf16, DType::f32, DType::i32})
    for (const CollectiveSpec& s : collective_registry())
      for (ReduceOp op : {ReduceOp::sum, ReduceOp::prod, ReduceOp::avg}) {
        std::vector<unsigned char> raw(elements * dtype_size(dtype));
        fill_send_values(raw.data(), elements, first, s, dtype, op, 2, 4);
        size_t differ = 0;
        for (size_t i = 0; i < elements; ++i)
          differ +=
              decode_element(raw.data(), i, dtype) == send_value(s, op, 2, 4, first + i) ? 0 : 1;
        EXPECT_EQ(differ, 0u) << s.name << " " << dtype_name(dtype);
      }
}

TEST(CollectiveBench, CheckerCountsWrongElementsInLargeOutputs) {
  // Outputs of many tiles: a wrong element deep inside any segment is counted, a correct buffer
  // counts nothing, and -0 where +0 is expected is the same value.
  const int n = 4;
  for (const char* name : {"all_reduce", "all_gather", "all_to_all", "sendrecv"}) {
    const CollectiveSpec& s = spec(name);
    const CollectiveShape shape = collective_shape(s, 4 * 1000003, DType::f32, n);
    const int rank = 1;
    const ResultChecker checker(s, shape, DType::f32, ReduceOp::sum, 0, rank, n);
    std::vector<float> got(checker.output_elements());
    for (size_t j = 0; j < got.size(); ++j)
      got[j] = static_cast<float>(checker.expected(j));
    EXPECT_EQ(checker.count_wrong(got.data()), 0u) << name;
    for (size_t j = 0; j < got.size(); ++j)
      if (got[j] == 0.0f) got[j] = -0.0f;
    EXPECT_EQ(checker.count_wrong(got.data()), 0u) << name << ": -0 is 0";
    const std::vector<size_t> bad = {got.size() / 3 + 5, got.size() - 1, got.size() / 2 + 8191};
    for (size_t j : bad)
      got[j] += 1.0f;
    EXPECT_EQ(checker.count_wrong(got.data()), bad.size()) << name;
  }
}

TEST(CollectiveBench, FitRecoversKnownAlphaBeta) {
  const double alpha_us = 12.5;
  const double beta_gbps = 340.0;
  std::vector<double> bytes, time_us;
  for (double b = 8; b <= 2147483648.0; b *= 2) {
    bytes.push_back(b * 1.5);
    time_us.push_back(alpha_us + b * 1.5 / (beta_gbps * 1e3));
  }
  RoofFit fit = fit_alpha_beta(bytes, time_us);
  EXPECT_NEAR(fit.alpha_us, alpha_us, 1e-6 * alpha_us);
  EXPECT_NEAR(fit.beta_gbps, beta_gbps, 1e-6 * beta_gbps);
  EXPECT_EQ(fit.points, bytes.size());

  // +-5% alternating noise: both parameters within 10%.
  for (size_t i = 0; i < time_us.size(); ++i)
    time_us[i] *= i % 2 == 0 ? 1.05 : 0.95;
  fit = fit_alpha_beta(bytes, time_us);
  EXPECT_NEAR(fit.alpha_us, alpha_us, 0.1 * alpha_us);
  EXPECT_NEAR(fit.beta_gbps, beta_gbps, 0.1 * beta_gbps);

  // Pure bandwidth: alpha 0, never negative.
  fit = fit_alpha_beta({1e6, 2e6, 4e6}, {1.0, 2.0, 4.0});
  EXPECT_NEAR(fit.alpha_us, 0.0, 1e-9);
  EXPECT_NEAR(fit.beta_gbps, 1000.0, 1e-6);
  // Times that do not grow with size: no bandwidth term.
  fit = fit_alpha_beta({8, 16, 32}, {5.0, 5.0, 5.0});
  EXPECT_NEAR(fit.alpha_us, 5.0, 1e-9);
  EXPECT_TRUE(std::isinf(fit.beta_gbps));
  EXPECT_THROW(fit_alpha_beta({8}, {1.0}), Error);
  EXPECT_THROW(fit_alpha_beta({8, 8}, {1.0, 1.1}), Error);
}

TEST(CollectiveBench, EnvelopeFitStaysUnderEveryPoint) {
  // alpha = 0.9 x 10 us = 9 us; beta = max(1e6 / 11e3, 1e7 / 101e3) = 99.0099 GB/s, set by the
  // largest point (where the line touches it); the 1 MB point stays above the line.
  const std::vector<double> bytes = {0, 1e6, 1e7};
  const std::vector<double> time_us = {10, 20, 110};
  double alpha = -1, beta = -1;
  envelope_fit(bytes, time_us, alpha, beta);
  EXPECT_DOUBLE_EQ(alpha, 9.0);
  EXPECT_NEAR(beta, 1e7 / 101e3, 1e-9);
  EXPECT_NEAR(beta, 99.0099, 1e-4);
  for (size_t i = 0; i < bytes.size(); ++i)
    EXPECT_LE(alpha + bytes[i] / (beta * 1e3), time_us[i] * (1 + 1e-12)) << i;
  EXPECT_NEAR(alpha + bytes[2] / (beta * 1e3), time_us[2], 1e-9);
  EXPECT_GT(time_us[1] - (alpha + bytes[1] / (beta * 1e3)), 0.8);

  // Order does not matter, and untimed points (time <= 0) are skipped.
  envelope_fit({1e7, 0, 5e5, 1e6}, {110, 10, 0, 20}, alpha, beta);
  EXPECT_DOUBLE_EQ(alpha, 9.0);
  EXPECT_NEAR(beta, 1e7 / 101e3, 1e-9);

  // No bytes anywhere (a group of one): nothing limits the bandwidth.
  envelope_fit({0, 0}, {4, 8}, alpha, beta);
  EXPECT_DOUBLE_EQ(alpha, 3.6);
  EXPECT_TRUE(std::isinf(beta));

  EXPECT_THROW(envelope_fit({8, 16}, {0, -1}, alpha, beta), Error);
  EXPECT_THROW(envelope_fit({}, {}, alpha, beta), Error);
  EXPECT_THROW(envelope_fit({8}, {1, 2}, alpha, beta), Error);
}

TEST(CollectiveBench, AutoAllReduceTakesTheFastestAtTheSizeThatHoldsTheMessage) {
  // NCCL wins large messages, one-shot small ones, two-shot in between.
  const std::vector<AllReduceTiming> table = {
      {"nccl", 8192, 20000},    {"oneshot", 8192, 6000},     {"twoshot", 8192, 9000},
      {"nccl", 65536, 22000},   {"oneshot", 65536, 15000},   {"twoshot", 65536, 12000},
      {"nccl", 1048576, 40000}, {"oneshot", 1048576, 90000}, {"twoshot", 1048576, 45000}};
  EXPECT_EQ(choose_all_reduce(table, 1), "oneshot");
  EXPECT_EQ(choose_all_reduce(table, 8192), "oneshot");
  EXPECT_EQ(choose_all_reduce(table, 8193), "twoshot") << "the next measured size holds it";
  EXPECT_EQ(choose_all_reduce(table, 65536), "twoshot");
  EXPECT_EQ(choose_all_reduce(table, 100000), "nccl");
  EXPECT_EQ(choose_all_reduce(table, size_t{1} << 30), "nccl") << "beyond the table: the largest";
  EXPECT_THROW(choose_all_reduce({}, 64), UsageError);
}

TEST(CollectiveBench, CustomAllReduceNamesRoundTrip) {
  for (IpcAlgo algo : {IpcAlgo::oneshot, IpcAlgo::push, IpcAlgo::push_ll, IpcAlgo::twoshot})
    EXPECT_EQ(parse_ipc_algo(ipc_algo_name(algo)), algo) << ipc_algo_name(algo);
  EXPECT_STREQ(ipc_algo_name(IpcAlgo::push_ll), "push-ll");
  EXPECT_EQ(ipc_algo_names().size(), 4u);
  EXPECT_THROW(parse_ipc_algo("nccl"), UsageError) << "nccl is not a custom all-reduce";
  EXPECT_THROW(parse_ipc_algo("ring"), UsageError);
}

} // namespace
} // namespace ridgeline
