// `ridgeline model`'s own options: the machine, the links, the grid's what-ifs, calibration,
// validation and expert parallelism.
#include <algorithm>
#include <optional>
#include <string>

#include "app/command_support.hpp"
#include "app/model_detail.hpp"

namespace ridgeline::model_detail {

// The exponent of --routing zipf:S (S >= 0), or nothing where `routing` is not of that form.
std::optional<double> zipf_exponent(const std::string& routing) {
  const std::optional<RoutingControl> c = parse_routing(routing, 0);
  if (!c || c->mode != RoutingMode::zipf) return std::nullopt;
  return c->zipf_s;
}

Routing moe_routing(const ModelOptions& o, int64_t tokens, const ModelSpec& spec) {
  if (o.routing == "uniform") return route_uniform(tokens, spec.experts, spec.top_k);
  return route_zipf(tokens, spec.experts, spec.top_k, std::stod(o.routing.substr(5)),
                    o.routing_seed);
}

void bind_model_options(CLI::App& cmd, ModelOptions& o) {
  auto link_name = [](const std::string& v) {
    return std::find(std::begin(kLinks), std::end(kLinks), v) != std::end(kLinks)
               ? std::string()
               : "unknown link preset '" + v + "' (expected nvlink, pcie-gen5 or ib-ndr)";
  };
  cmd.add_option("--hardware", o.hardware,
                 "Hardware description (models/hardware/*.toml): data-sheet peaks, deratings and "
                 "the link presets; --roofs FILE, where given, takes precedence for the roofs")
      ->check(CLI::ExistingFile)
      ->check(regular_file())
      ->group("Prediction");
  cmd.add_option("--link", o.link,
                 "Link preset within a node: nvlink or pcie-gen5 (the hardware file's data-sheet "
                 "figures), or measured-host (the roofs' own interconnect rows measured over the "
                 "host path, transport host)")
      ->check(CLI::Validator(
          [link_name](const std::string& v) {
            return v == kMeasuredHost ? std::string() : link_name(v);
          },
          "PRESET"))
      ->group("Prediction");
  cmd.add_option("--inter-node", o.inter_node,
                 "Link preset between nodes: ib-ndr (for groups across nodes without a measured "
                 "inter or hier roof of their size)")
      ->check(CLI::Validator(link_name, "PRESET"))
      ->group("Prediction");
  cmd.add_option("--nodes", o.nodes,
                 "Nodes: the ranks placed node by node, TP innermost; each collective takes the "
                 "measured roof of its group's scope (intra, inter, hier) where the roofs hold "
                 "one, else its link's preset, and the console says which")
      ->check(integer_in(1, 1 << 20))
      ->group("Prediction");
  cmd.add_option("--gpus-per-node", o.gpus_per_node, "GPUs per node")
      ->check(integer_in(1, 1024))
      ->group("Prediction");
  cmd.add_option("--link-gbps", o.link_gbps,
                 "What-if link bandwidths (GB/s, comma list, with --link-alpha-us): every "
                 "collective at latency + bytes x its busbw factor / bandwidth, in place of the "
                 "roofs and presets; prints the lowest bandwidth at which the step's ceiling is "
                 "no longer the interconnect (link crossover), per latency")
      ->delimiter(',')
      ->check(number_above(0))
      ->group("Prediction");
  cmd.add_option("--link-alpha-us", o.link_alpha_us,
                 "What-if link latencies (us, comma list, with --link-gbps): each one's "
                 "collectives over every bandwidth")
      ->delimiter(',')
      ->check(number_above(0, true))
      ->group("Prediction");
  cmd.add_option("--gap", o.gap,
                 "Gap between launches added per kernel of every op and collective: auto "
                 "(--graphs: the roofs' graph node floor; eager: the gaps --calibrate measured "
                 "for the phase, else the roofs' eager launch floor), roofs (the floors alone) "
                 "or none")
      ->check(CLI::IsMember({"auto", "roofs", "none"}))
      ->group("Prediction");
  cmd.add_option("--calibrate", o.calibrate,
                 "Measured run or sweep file: each op kind's efficiency against its roofs, and "
                 "the gap between eager launches its uninstrumented steps left, per phase (a "
                 "mixed step's: the phase holding most of its tokens, so a decode-only mixed "
                 "step of ragged contexts calibrates a trace's decode steps), applied to the "
                 "predictions and printed (may be repeated)")
      ->check(CLI::ExistingFile)
      ->check(regular_file())
      ->group("Prediction");
  cmd.add_option("--validate", o.validate,
                 "Predict every measured point of this run or sweep file and print predicted "
                 "vs measured per op and per step (roofs: the file's own /roofs unless --roofs "
                 "or --hardware)")
      ->check(CLI::ExistingFile)
      ->check(regular_file())
      ->group("Prediction");
  // A sweep axis (bound by bind_sweep_axis_lists): here with what a prediction prints along it.
  cmd.get_option("--ep")->description(
      "Expert-parallel degrees of an MoE model (comma list: one point per value): an EP group "
      "is ep consecutive ranks, TP innermost (tp x dp must divide by it), each rank holding "
      "experts / ep experts and routing its block of tokens / tp of its TP group's tokens; the "
      "dispatch and combine all-to-alls run over it. Prints where the all-to-all exceeds the "
      "compute- and HBM-bound time (all-to-all "
      "crossover)");
  cmd.remove_option(cmd.get_option("--routing"));
  cmd.remove_option(cmd.get_option("--routing-seed"));
  cmd.add_option("--routing", o.routing,
                 "MoE routing predicted: uniform (every expert floor or ceil of the mean rows) "
                 "or zipf:S (expert e drawn with probability ~ (e + 1)^-S, the hot experts on "
                 "the first EP rank)")
      ->group("Prediction");
  cmd.add_option("--routing-seed", o.routing_seed, "Seed of --routing zipf:S's draws")
      ->group("Prediction");
}

} // namespace ridgeline::model_detail
