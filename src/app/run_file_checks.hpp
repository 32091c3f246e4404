// The pieces the run file's validators share (run_file_validate.cpp: the file's structure,
// ranks, links, topology, config, points and sweep; run_file_validate_results.cpp: summaries,
// decode, pipeline and serving figures, collectives and roofs). Internal to the run file's
// sources.
#pragma once

#include <exception>
#include <optional>
#include <set>
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

/// The summary below `base` ("" or /points/<k>), with its decode and pipeline figures, and a
/// trace run's /serving beside it.
void validate_summary(hid_t file, const std::string& base, std::vector<std::string>& problems);
/// A trace run's /serving under `base` (a run's root, or a sweep point's group): its
/// attributes, both tables row by row and against each other, and the check of its steps.
void validate_serving(hid_t file, const std::string& base, std::vector<std::string>& problems);
/// The /collectives tables of a collectives file.
void validate_collectives(hid_t file, std::vector<std::string>& problems);
/// The interconnect roof (/roofs/interconnect); its lower envelope when `envelope_required`.
void validate_roof(hid_t file, std::vector<std::string>& problems, bool envelope_required);
/// The schema's conditions that hold for the object checked ("repeats", "envelope", ...): what
/// they require is then required.
using Conditions = std::set<std::string>;
/// The table at `path` against `spec`: each field it requires missing or of another class is a
/// problem (an optional one only where present). The table when every required field is there.
std::optional<h5::Table> validate_table(hid_t file, const std::string& path,
                                        const schema::Table& spec, const Conditions& held,
                                        std::vector<std::string>& problems);
/// The table at `spec.path` (one without placeholders), as validate_table().
std::optional<h5::Table> validate_table(hid_t file, const schema::Table& spec,
                                        const Conditions& held, std::vector<std::string>& problems);
/// A problem per attribute of `group` (in its order) present in `attrs` but not of its type,
/// where its type is checked generically (not `code`); names with <...> match by prefix.
void check_attribute_types(const Attrs& attrs, const std::string& where,
                           const schema::AttributeGroup& group, std::vector<std::string>& problems);
/// The attributes of `group` that `held` requires (always, or by a condition that holds).
std::vector<std::string> required_attributes(const schema::AttributeGroup& group,
                                             const Conditions& held = {});
/// The `required` of attribute `name` of `group` ("optional" where the group lacks it).
inline const char* find_required(const schema::AttributeGroup& group, const std::string& name) {
  for (const schema::Attribute& attribute : schema::attributes_of(group))
    if (name == attribute.name) return attribute.required;
  return "optional";
}
/// The attributes of `group` that `condition` alone requires.
std::vector<std::string> attributes_required_by(const schema::AttributeGroup& group,
                                                const char* condition);
/// Every /roofs table of a roofs, run or sweep file.
void validate_roofs(hid_t file, std::vector<std::string>& problems);

} // namespace ridgeline::run_file_detail
