// The overlap strategies: how a stage overlaps its collectives with compute. One registry row
// per strategy (overlap_forms()) holds its word, its parameter, where it may run and its
// description; parsing, the names, the --help text and the checks of what each executor runs
// all read the registry.
#pragma once

#include <string>
#include <vector>

#include "models/model_spec.hpp"

namespace ridgeline {

/// One strategy of a stage (a registry row's kind with its degree):
///   none       collectives on the compute queue, serialized (the eager-framework baseline)
///   async      collectives on their own queue, joined by events (overlaps what is independent)
///   chunked:K  the tokens are cut into K chunks: the collective of chunk i runs while the GEMM
///              of chunk i+1 computes (under sequence parallelism the all-gather of chunk i+1
///              runs while the GEMM of chunk i computes)
///   split:N    the batch is cut into N parts whose layers interleave, so one part's collective
///              runs under another part's compute; on TpStage a single prefill sequence is cut
///              into N token ranges instead, each attending causally to every earlier token
///   ce-ring    the tokens are cut into tp pieces and the collectives become puts into the peers'
///              memory (a PeerExchange: the copy engines on GPUs, MPI messages on the host):
///              under sequence parallelism each rank puts its rows into every peer while its
///              GEMM runs on them, then computes each peer's piece as it lands; a row-parallel
///              GEMM computes the piece each peer owns first and puts it there while it computes
///              its own, then adds what the peers put (reduce-scatter); without sequence
///              parallelism the summed pieces are then put into every peer (all-gather)
///   ce-ring:K  ce-ring with every piece of a row-parallel GEMM in K sub-pieces: the peers'
///              first, each put while the next computes, then this rank's own, each GEMM adding
///              a peer's partial sub-piece in its epilogue (no add kernel at tp 2); without
///              sequence parallelism each summed sub-piece is put into the peers while the next
///              computes, so that only the last one's all-gather is left after the GEMM
///   symm:S     S (none, async or chunked:K) with every buffer its collectives read or write in
///              the communicator's symmetric memory (NCCL: one window registered with
///              NCCL_WIN_COLL_SYMMETRIC, at the same offsets on every rank), so that NCCL may
///              run its symmetric kernels, or under CTA policy zero its copy-engine collectives;
///              where the communicator has none (MPI on the host) S on ordinary buffers
struct Overlap {
  enum class Kind { none, async, chunked, split, ce_ring };
  Kind kind = Kind::none;
  int degree = 1;         ///< K for chunked and ce-ring, N for split
  bool symmetric = false; ///< symm: the collectives' buffers in symmetric memory

  /// What its policy (overlap_policy.hpp) cuts a microbatch into: parts (split:N), chunks of
  /// each part (chunked:K), and sub-pieces of each ring piece (ce-ring:K); 1 elsewhere.
  int parts() const;
  int chunks() const;
  int ring_subpieces() const;
  /// "none", "async", "chunked:K", "split:N", "ce-ring", "ce-ring:K" or "symm:" and one of the
  /// first three (parse_overlap's inverse).
  std::string name() const;
};

struct OverlapPolicy;
/// The stage executors: TpStage (prefill and decode forward) and TrainStage (the train phase,
/// forward and backward, and scheduled prefill).
enum class StageExecutor { forward, train };

/// One registry row: a kind of strategy and what the code around it needs to know of it.
struct OverlapForm {
  Overlap::Kind kind;
  const char* word; ///< as written before any ":" (none, async, chunked, split, ce-ring)
  /// Its degree: none (the word alone), required (word:K with K >= 2) or optional (the word
  /// alone is degree 1, word:K takes K >= 2).
  enum class Degree { none, required, optional } degree;
  const char* letter;  ///< the degree's letter in the forms (K, N); "" without one
  bool symmetric_ok;   ///< may run in symmetric memory (symm:)
  bool scheduled_ok;   ///< TrainStage (the train phase and scheduled prefill) runs it
  bool graphs_ok;      ///< its steps may be captured in a CUDA graph and replayed
  const char* summary; ///< what it does, for --help
  /// What the executors run (its maker, in overlap_<word>.cpp).
  OverlapPolicy (*policy)(const Overlap& overlap);
  /// Its own problems on a shape for an executor (the batch or the tokens its cuts need), added
  /// to those of every strategy (its units' row blocks); null: none of its own.
  void (*problems)(const Overlap& overlap, const LayerShape& shape, StageExecutor executor,
                   std::vector<std::string>& out);
};
/// Every strategy kind, in the order of the forms --help lists.
const std::vector<OverlapForm>& overlap_forms();
/// The registry row of `kind`.
const OverlapForm& overlap_form(Overlap::Kind kind);

/// Parses one strategy; throws UsageError naming the accepted forms.
Overlap parse_overlap(const std::string& text);
/// The accepted forms, comma-separated: "none, async, chunked:K (K >= 2), ..., symm:chunked:K".
std::string overlap_forms_text();
/// The forms TrainStage runs (scheduled_ok), comma-separated: "none, async, chunked:K, ...".
std::string scheduled_forms_text();
/// --help's description of --overlap: every form with what it does.
std::string overlap_help();

/// Whether split:N cuts the tokens of a single prefill sequence rather than the batch (TpStage
/// only: TrainStage's attention backward takes whole sequences).
bool splits_tokens(const LayerShape& shape, const Overlap& overlap);
/// The problems that make `spec`'s token split impossible for `executor` (empty = fine): under
/// split:N the batch must divide into N parts (or, on TpStage, be one prefill sequence, split by
/// tokens); chunks (and tp shards under sequence parallelism) must divide the tokens; ce-ring's
/// pieces too.
std::vector<std::string> stage_split_problems(const LayerShape& shape, const Overlap& overlap,
                                              StageExecutor executor = StageExecutor::forward);

} // namespace ridgeline
