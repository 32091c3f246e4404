// The pieces the run file's validators share (run_file_validate.cpp: the file's structure,
// ranks, links, topology, config, points and sweep; run_file_validate_results.cpp: summaries,
// decode and pipeline figures, collectives and roofs). Internal to the run file's sources.
#pragma once

#include <exception>
#include <string>
#include <vector>

#include "app/run_file_schema.hpp"

namespace ridgeline::run_file_detail {

/// Runs one group of checks; an exception (an unreadable object) becomes one more problem, so
/// one broken object never hides problems elsewhere.
template <class Fn> void check_section(std::vector<std::string>& problems, Fn&& checks) {
  try {
    checks();
  } catch (const std::exception& e) {
    problems.emplace_back(e.what());
  }
}

/// Whether the object at `path` exists; a problem naming `what` when it does not.
bool require_object(hid_t file, const std::string& path, const char* what,
                    std::vector<std::string>& problems);
/// A problem per attribute of `keys` missing from `attrs` (at `where`).
void require_attrs(const Attrs& attrs, const std::string& where,
                   const std::vector<std::string>& keys, std::vector<std::string>& problems);
/// The output_checksum attributes at `where`, where present.
void validate_checksum(const Attrs& attrs, const std::string& where,
                       std::vector<std::string>& problems);

/// The summary below `base` ("" or /points/<k>), with its decode and pipeline figures.
void validate_summary(hid_t file, const std::string& base, std::vector<std::string>& problems);
/// The /collectives tables of a collectives file.
void validate_collectives(hid_t file, std::vector<std::string>& problems);
/// The interconnect roof (/roofs/interconnect); its lower envelope when `envelope_required`.
void validate_roof(hid_t file, std::vector<std::string>& problems, bool envelope_required);
/// One /roofs (or /sweep) table against its fields.
void validate_fields(hid_t file, const RoofTable& spec, std::vector<std::string>& problems);
/// Every /roofs table of a roofs, run or sweep file.
void validate_roofs(hid_t file, std::vector<std::string>& problems);

} // namespace ridgeline::run_file_detail
