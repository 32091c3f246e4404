// The overlap strategies' registry (see overlap.hpp).
#include "parallel/overlap.hpp"

#include "core/error.hpp"
#include "parallel/overlap_strategies.hpp"

namespace ridgeline {

const std::vector<OverlapForm>& overlap_forms() {
  using D = OverlapForm::Degree;
  static const std::vector<OverlapForm> forms = {
      {Overlap::Kind::none, "none", D::none, "", true, true, true, "serialized", none_policy,
       nullptr},
      {Overlap::Kind::async, "async", D::none, "", true, true, true, "own stream", async_policy,
       nullptr},
      {Overlap::Kind::chunked, "chunked", D::required, "K", true, true, true,
       "K token chunks pipelined with their collectives", chunked_policy, nullptr},
      {Overlap::Kind::split, "split", D::required, "N", false, true, true,
       "N interleaved parts of the batch; of the tokens for one prefill sequence", split_policy,
       split_problems},
      {Overlap::Kind::ce_ring, "ce-ring", D::optional, "K", false, true, false,
       "tp pieces; the collectives as puts into the peers' memory on the copy engines, each "
       "beside the GEMM of another piece; MPI messages on the host. ce-ring:K cuts the "
       "row-parallel GEMMs' pieces in K sub-pieces, the peers' partial sums added in the GEMM; "
       "without --sequence-parallel each summed sub-piece is put into the peers while the next "
       "computes",
       ce_ring_policy, ce_ring_problems}};
  return forms;
}

const OverlapForm& overlap_form(Overlap::Kind kind) {
  for (const OverlapForm& f : overlap_forms())
    if (f.kind == kind) return f;
  throw Error("overlap_form: a kind without a registry row");
}

std::string Overlap::name() const {
  const OverlapForm& f = overlap_form(kind);
  const std::string plain = f.degree == OverlapForm::Degree::none ||
                                    (f.degree == OverlapForm::Degree::optional && degree == 1)
                                ? std::string(f.word)
                                : std::string(f.word) + ":" + std::to_string(degree);
  return symmetric ? "symm:" + plain : plain;
}

namespace {

// The forms of one registry row: "word", "word:K (K >= 2)" or both.
std::vector<std::string> forms_of(const OverlapForm& f, bool bounds) {
  const std::string with = std::string(f.word) + ":" + f.letter +
                           (bounds ? std::string(" (") + f.letter + " >= 2)" : "");
  switch (f.degree) {
  case OverlapForm::Degree::none:
    return {f.word};
  case OverlapForm::Degree::required:
    return {with};
  case OverlapForm::Degree::optional:
    return {f.word, with};
  }
  return {};
}

// The symm: forms: "symm:none, symm:async, symm:chunked:K" (those TrainStage runs with
// `scheduled`).
std::vector<std::string> symmetric_forms(bool scheduled = false) {
  std::vector<std::string> out;
  for (const OverlapForm& f : overlap_forms())
    if (f.symmetric_ok && (f.scheduled_ok || !scheduled))
      for (const std::string& form : forms_of(f, false))
        out.push_back("symm:" + form);
  return out;
}

std::string joined(const std::vector<std::string>& items) {
  std::string s;
  for (const std::string& item : items)
    s += (s.empty() ? "" : ", ") + item;
  return s;
}

// One strategy without the symm: prefix (false when `text` is no form of the registry).
bool parse_plain(const std::string& text, Overlap& o) {
  const size_t colon = text.find(':');
  const std::string word = text.substr(0, colon);
  for (const OverlapForm& f : overlap_forms()) {
    if (word != f.word) continue;
    o.kind = f.kind;
    if (colon == std::string::npos) return f.degree != OverlapForm::Degree::required;
    if (f.degree == OverlapForm::Degree::none) return false;
    const std::string n = text.substr(colon + 1);
    if (n.empty() || n.size() > 4 || n.find_first_not_of("0123456789") != std::string::npos)
      return false;
    o.degree = std::stoi(n);
    return o.degree >= 2;
  }
  return false;
}

} // namespace

std::string overlap_forms_text() {
  std::vector<std::string> forms;
  for (const OverlapForm& f : overlap_forms())
    for (const std::string& form : forms_of(f, true))
      forms.push_back(form);
  for (const std::string& form : symmetric_forms())
    forms.push_back(form);
  return joined(forms);
}

std::string scheduled_forms_text() {
  std::vector<std::string> forms;
  for (const OverlapForm& f : overlap_forms())
    if (f.scheduled_ok)
      for (const std::string& form : forms_of(f, false))
        forms.push_back(form);
  for (const std::string& form : symmetric_forms(true))
    forms.push_back(form);
  return joined(forms);
}

std::string overlap_help() {
  std::vector<std::string> items;
  for (const OverlapForm& f : overlap_forms()) {
    const std::vector<std::string> forms = forms_of(f, false);
    items.push_back(joined(forms) + " (" + f.summary + ")");
  }
  return "Comma list of strategies run back to back: " + joined(items) + ", " +
         joined(symmetric_forms()) +
         " (those with the collectives' buffers in one NCCL symmetric window; ordinary buffers "
         "on the host)";
}

Overlap parse_overlap(const std::string& text) {
  const std::string symm = "symm:";
  const bool symmetric = text.compare(0, symm.size(), symm) == 0;
  Overlap o;
  if (!parse_plain(symmetric ? text.substr(symm.size()) : text, o) ||
      (symmetric && !overlap_form(o.kind).symmetric_ok))
    throw UsageError("overlap strategy '" + text + "' is not one of " + overlap_forms_text());
  o.symmetric = symmetric;
  return o;
}

int Overlap::parts() const {
  return overlap_policy(*this).parts;
}
int Overlap::chunks() const {
  return overlap_policy(*this).chunks;
}
int Overlap::ring_subpieces() const {
  return overlap_policy(*this).ring_subpieces;
}

std::vector<std::string> stage_split_problems(const LayerShape& s, const Overlap& o,
                                              StageExecutor executor) {
  return policy_problems(o, s, executor);
}

} // namespace ridgeline
