// The public synthetic-model entry point (include/synapse/synth.hpp) over
// model/synth.hpp.
#include "base/thread_pool.hpp"
#include "model/synth.hpp"
#include "synapse/error.hpp"
#include "synapse/synth.hpp"

namespace synapse {

std::vector<std::string> synth_preset_names() { return model::synth_preset_names(); }

std::vector<std::string> synth_type_names() { return model::synth_type_names(); }

SynthStats write_synthetic_model(const std::string& path, const SynthParams& params) {
  model::SynthPreset p = model::synth_preset(params.preset);
  if (params.n_layer < 0 || params.n_vocab < 0 || params.n_expert < 0)
    throw Error(Errc::invalid_argument, "synth: n_layer, n_vocab and n_expert must be positive");
  if (params.n_expert > 0 && p.n_expert == 0)
    throw Error(Errc::invalid_argument, "synth: " + params.preset + " has no experts to set the count of");
  if (params.n_layer > 0) p.n_layer = params.n_layer;
  if (params.n_vocab > 0) p.n_vocab = params.n_vocab;
  if (params.n_expert > 0) p.n_expert = params.n_expert;  // synth_plan checks n_expert_used <= n_expert
  base::ThreadPool pool(params.n_threads > 0 ? params.n_threads : base::default_thread_count());
  const model::SynthResult r = model::synth_write(p, params.type, params.seed, path, pool);
  return SynthStats{r.n_params, r.tensor_bytes, r.file_bytes, r.seconds};
}

}  // namespace synapse
