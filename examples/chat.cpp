// Streams one chat reply with the public synapse API.
//   example_chat MODEL.gguf "your message" [max_tokens]
// Loads the model, formats the message with the model's chat template (or
// ChatML), runs the prompt, then samples with llama.cpp's default chain until
// the end of the turn or max_tokens, printing text as it comes.
#include <cstdio>
#include <string>

#include "synapse/chat.hpp"
#include "synapse/sampling.hpp"
#include "synapse/stop.hpp"
#include "synapse/synapse.hpp"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s MODEL.gguf MESSAGE [MAX_TOKENS]\n", argv[0]);
    return 2;
  }
  try {
    const synapse::Model model = synapse::Model::load(argv[1]);
    const synapse::Tokenizer& tok = model.tokenizer();
    synapse::Context ctx(model);
    synapse::Sequence seq = ctx.new_sequence();

    // The conversation so far: one user message, then the assistant's turn.
    const synapse::ChatTemplate tmpl = synapse::chat_template_for_model(model.gguf());
    const std::vector<synapse::ChatMessage> messages{{"user", argv[2]}};
    const std::vector<synapse::token_id> prompt =
        synapse::tokenize_chat(tok, tmpl, messages, /*add_generation_prompt=*/true, /*add_special=*/true);

    synapse::SamplerParams sp;
    sp.seed = 42;
    synapse::Sampler sampler(sp);
    synapse::StopParams stop_params;
    stop_params.n_predict = argc > 3 ? std::stoi(argv[3]) : 256;
    synapse::Stopper stopper(tok, stop_params);

    std::span<const float> logits = ctx.decode(seq, prompt);
    while (!stopper.done() && seq.n_past() < seq.n_ctx()) {
      const synapse::token_id next = sampler.sample(logits);
      sampler.accept(next);
      const std::string text = stopper.on_token(next);
      std::fwrite(text.data(), 1, text.size(), stdout);
      std::fflush(stdout);
      if (stopper.done()) break;
      logits = ctx.decode(seq, std::span<const synapse::token_id>(&next, 1));
    }
    const std::string rest = stopper.finish();
    std::fwrite(rest.data(), 1, rest.size(), stdout);
    std::printf("\n");
    std::fprintf(stderr, "[%d tokens, stopped by %s]\n", stopper.n_generated(),
                 synapse::stop_reason_name(stopper.reason()));
    return 0;
  } catch (const synapse::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
