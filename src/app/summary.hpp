// Reduction of every rank's timeline into the run summary, without gathering timelines.
#pragma once

#include <mpi.h>

#include <vector>

#include "app/run_data.hpp"

namespace ridgeline {

/// Step times and per-op aggregates over the timed (non-warm-up) iterations of every rank of
/// `comm`, each rank giving only its own timeline `mine` (every rank calls; every rank gets the
/// same summary). A step's time is the longest rank's span of that iteration; a collective or
/// p2p instance (layer, microbatch, iteration) takes its maximum over ranks; compute instances
/// count once per rank. An op's time per step is the union of its instances' intervals on a
/// rank (instances in flight together count once), the longest rank's, so its share of the step
/// never exceeds 1; its costs are the mean per instance (data-parallel buckets differ). No rank
/// holds another's timeline: the reductions carry per-iteration maxima, counts and sums, collective
/// instances travel in slices of iterations, and instance percentiles are selected exactly (numpy's
/// linear interpolation) by bisection over counts. Throws Error when the ranks' op tables differ.
RunSummary summarize_run(MPI_Comm comm, const OpTable& ops,
                         const std::vector<TimelineRecord>& mine);

/// At most 8 bins of equal width over the context lengths of `summary.step_context`, each
/// with its timed iterations' time percentiles (empty without --decode-steps).
std::vector<DecodeBin> decode_bins(const RunSummary& summary);
/// The bins as the /summary/decode_bins table.
Table decode_bins_table(const std::vector<DecodeBin>& bins);

/// The `k`-th smallest value (0-based) of each query's set, where set `s` is the union over the
/// ranks of `comm` of every rank's sorted `sets[s]`: queries are (set, k) pairs, the same on
/// every rank, each with k below the set's total size. Every rank calls and gets the answers.
std::vector<int64_t> select_kth(MPI_Comm comm, const std::vector<std::vector<int64_t>>& sets,
                                const std::vector<std::pair<size_t, int64_t>>& queries);

} // namespace ridgeline
