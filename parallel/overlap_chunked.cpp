// chunked:K: every site's rows cut into K units on the comm lane: a row-parallel GEMM's unit
// u + 1 computes while unit u's reduction runs, and under sequence parallelism unit u + 1's
// all-gather runs while unit u's column-parallel GEMM computes (row_site, column_site). Both
// executors run it, TrainStage in the backward too (its input-gradient reductions and, under
// sequence parallelism, its output-gradient all-gathers).
#include "parallel/overlap_strategies.hpp"

namespace ridgeline {

OverlapPolicy chunked_policy(const Overlap& overlap) {
  OverlapPolicy p;
  p.overlap = overlap;
  p.chunks = overlap.degree;
  p.queue = Lane::comm;
  return p;
}

} // namespace ridgeline
