// Reporters: what a job prints and writes once measured — the console tables, the HDF5 file's
// contents, and JSON and markdown summaries of the same numbers — and the Reporter interface
// through which every measuring command prints and writes them.
#pragma once

#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "app/command_support.hpp"
#include "app/point.hpp"
#include "app/run_data.hpp"

namespace ridgeline {

/// The summary of a run: configuration line, per-op table (with each op's bound, ceiling and
/// efficiency when the run was attributed), step percentiles, the step split by ceiling, and
/// (with `all_scalars`, as `report` prints a file) the summary's other scalars. Ops measured
/// faster than their ceiling are flagged.
void print_report(std::ostream& out, const RunData& data, bool all_scalars = true);
/// The run's answer in two lines, printed last: the step, its ceiling and each class's share,
/// the check, and where along `axis` the interconnect is or becomes the ceiling (`crossover`:
/// the roofs' prediction from this point; empty kind = none made).
void print_headline(std::ostream& out, const RunSummary& summary, const std::string& label,
                    const std::string& check, const std::string& axis,
                    const std::string& crossover_value, const std::string& crossover_note);
/// The attention implementations side by side (--attention with several): the step, the
/// attention op's time, share of the step, achieved TFLOP/s, its ceiling and efficiency.
void print_attention_table(std::ostream& out, const std::vector<StrategyResult>& results);
/// The strategies side by side: step, compute-only, comm-only, exposed, efficiency.
/// Scheduled pipelines: per strategy and stage, the measured bubble beside the schedule's
/// theory, the exposed pipeline and data-parallel communication, the peak activation memory.
void print_pipeline_table(std::ostream& out, const std::vector<StrategyResult>& results,
                          int stages);
void print_overlap_table(std::ostream& out, const std::vector<StrategyResult>& results);
/// SM clock, power and power-capped share per strategy and loop (NVML means over every rank).
void print_gpu_table(std::ostream& out, const std::vector<StrategyResult>& results, int sample_ms);
/// With `run --repeats`: each strategy's median p50 step over the repeats with its 95 %
/// interval, and the repeat (`used`, from 0) whose timelines and summaries the file keeps.
void print_repeats(std::ostream& out, const std::vector<StrategyResult>& results, size_t used);

/// The nccl-tests-style section of one /collectives/<name> table `t` (`config`: the file's
/// /config): its header (from the table's attributes), its rows [first, last), and the line of
/// its average bus bandwidth. `collectives` prints them as sizes complete, `report` from a file.
void print_collective_header(std::ostream& out, const NamedTable& t, const Attrs& config);
void print_collective_rows(std::ostream& out, const NamedTable& t, size_t first, size_t last);
void print_collective_footer(std::ostream& out, const NamedTable& t);
/// The closing table: average bus bandwidth and the fitted roof (`roof`: /roofs/interconnect,
/// or nullptr) of each result table of `tables`.
void print_collectives_summary(std::ostream& out, const std::vector<NamedTable>& tables,
                               const NamedTable* roof);
/// Every section of a collectives file, then the closing table (what the job printed).
void print_collectives_file(std::ostream& out, const RunData& data);
/// Whether `t` is a /collectives/<name> result table (not its per-iteration samples).
bool is_collective_result(const NamedTable& t);

/// A file's tables as JSON: {"attrs": {...}, "<name>": [{row}, ...], ...}; a table is a list of
/// objects, one per row.
void write_json(const std::string& path, const std::vector<std::pair<std::string, Attrs>>& attrs,
                const std::vector<std::pair<std::string, Table>>& tables);
/// The same as markdown: a heading and a list per attribute group, a table per table.
void write_markdown(const std::string& path, const std::string& title,
                    const std::vector<std::pair<std::string, Attrs>>& attrs,
                    const std::vector<std::pair<std::string, Table>>& tables);

/// One output of a measuring command's results: the console tables, the HDF5 file, or the JSON
/// and markdown summaries. A command lists its reporters once, in the order they write, and
/// hands them to JobReports, which checks their files before anything is measured and has each
/// write once the results are in.
class Reporter {
public:
  virtual ~Reporter() = default;
  /// The files it will write (an empty path: none), checked before anything is measured.
  virtual std::vector<NamedFile> outputs() const { return {}; }
  /// Prints or writes the results. Every rank calls it; a reporter of rank 0 alone returns at
  /// once on the other ranks.
  virtual void write() = 0;
  /// Rank 0: the files it wrote or tried to, for the "wrote" lines and output_status().
  virtual std::vector<const OutputFile*> files() const { return {}; }
  /// What the "wrote" line of each of its files adds after the path ("": nothing).
  virtual std::string wrote_note() const { return ""; }
};

/// The console tables: `print(std::cout)` on rank 0.
class ConsoleReporter : public Reporter {
public:
  ConsoleReporter(const MpiSession& mpi, std::function<void(std::ostream&)> print);
  void write() override;

private:
  const MpiSession& m_mpi;
  std::function<void(std::ostream&)> m_print;
};

/// The HDF5 file (--out), written at the path asked for or at a fallback (OutputFile). With
/// `every_rank` every rank takes part in each write, at rank 0's path (the per-rank rows), and
/// rank 0 alone says what happens; otherwise rank 0 writes it alone. No path: no file.
class Hdf5Reporter : public Reporter {
public:
  /// Writes the file at `path` (throws on failure); returns what the "wrote" line adds after
  /// the path ("": nothing).
  using Writer = std::function<std::string(const std::string& path)>;
  Hdf5Reporter(const MpiSession& mpi, const std::string& path, bool every_rank, Writer writer);
  std::vector<NamedFile> outputs() const override;
  /// Writes the file, or writes it again: sweep and collectives rewrite it as the job goes on,
  /// each time at the path of the first write that succeeded.
  void write() override;
  std::vector<const OutputFile*> files() const override;
  std::string wrote_note() const override { return m_note; }
  /// Where the file is now, and whether it was lost.
  const OutputFile& file() const { return m_file; }

private:
  const MpiSession& m_mpi;
  std::string m_path;
  bool m_every_rank;
  Writer m_writer;
  OutputFile m_file;
  std::string m_note;
};

/// The --json and --markdown summaries of the same attribute groups and tables, each written
/// where its path was given, by rank 0; `title` heads the markdown.
class SummaryReporter : public Reporter {
public:
  SummaryReporter(const MpiSession& mpi, const std::string& json, const std::string& markdown,
                  std::string title);
  /// Rank 0, once measured: what the summaries hold.
  void set(std::vector<std::pair<std::string, Attrs>> attrs,
           std::vector<std::pair<std::string, Table>> tables);
  std::vector<NamedFile> outputs() const override;
  void write() override;
  std::vector<const OutputFile*> files() const override;

private:
  const MpiSession& m_mpi;
  std::string m_title;
  std::string m_json_path, m_markdown_path;
  OutputFile m_json, m_markdown;
  std::vector<std::pair<std::string, Attrs>> m_attrs;
  std::vector<std::pair<std::string, Table>> m_tables;
};

/// The ends that every measuring command shares, around its reporters, listed in the order they
/// write (console tables that hold the results come before the files: whatever happens to the
/// files, the numbers are on stdout).
class JobReports {
public:
  JobReports(const CommandContext& ctx, std::vector<Reporter*> reporters);
  /// Every rank calls, before anything is measured: rank 0 returns the problems of the files the
  /// reporters will write, against `inputs` and the --config files (check_outputs()); the
  /// other ranks return none (for reject_if_any()).
  std::vector<std::string> file_problems(std::vector<NamedFile> inputs = {}) const;
  /// Every rank calls, once measured: each reporter writes in turn, rank 0 prints a "wrote" line
  /// per file written, and every rank returns rank 0's exit status: `failure` where it is not 0
  /// (a wrong result outranks a file written elsewhere), else output_status() of the files.
  int finish(int failure = 0);

private:
  const CommandContext& m_ctx;
  std::vector<Reporter*> m_reporters;
};

} // namespace ridgeline
