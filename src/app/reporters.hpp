// Reporters: what a job prints and writes once measured — the console tables, the HDF5 file's
// contents, and JSON and markdown summaries of the same numbers.
#pragma once

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

/// A command's --json and --markdown summaries of the same attribute groups and tables, each
/// written where its path was given; `title` heads the markdown. Rank 0 alone.
class SummaryFiles {
public:
  SummaryFiles(const std::string& json, const std::string& markdown);
  /// Writes them and appends those it wrote to `files` (for the "wrote" lines and
  /// output_status()): `files` then points into this object.
  void write(const std::string& title, const std::vector<std::pair<std::string, Attrs>>& attrs,
             const std::vector<std::pair<std::string, Table>>& tables,
             std::vector<const OutputFile*>& files);

private:
  bool m_want_json, m_want_markdown;
  OutputFile m_json, m_markdown;
};

} // namespace ridgeline
