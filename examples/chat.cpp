// Streams one chat reply with the public synapse API.
//   example_chat MODEL.gguf "your message" [max_tokens]
// Loads the model, formats the message with the model's chat template (or
// ChatML), runs the prompt, then samples with llama.cpp's default chain until
// the end of the turn or max_tokens, printing text as it comes.
#include <cstdio>
#include <string>

#include "synapse/chat.hpp"
#include "synapse/generation.hpp"
#include "synapse/synapse.hpp"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s MODEL.gguf MESSAGE [MAX_TOKENS]\n", argv[0]);
    return 2;
  }
  try {
    const synapse::Model model = synapse::Model::load(argv[1]);
    synapse::Context ctx(model);
    synapse::Sequence seq = ctx.new_sequence();

    // The conversation so far: one user message, then the assistant's turn.
    const synapse::ChatTemplate tmpl = synapse::chat_template_for_model(model.gguf());
    const std::vector<synapse::ChatMessage> messages{{"user", argv[2]}};
    const std::vector<synapse::token_id> prompt = synapse::tokenize_chat(
        model.tokenizer(), tmpl, messages, /*add_generation_prompt=*/true, /*add_special=*/true);

    synapse::GenerationParams params;
    params.sampling.seed = 42;
    params.max_tokens = argc > 3 ? std::stoi(argv[3]) : 256;
    const synapse::GenerationResult r =
        synapse::generate(ctx, seq, prompt, params, [](const synapse::GeneratedToken& t) {
          std::fwrite(t.text.data(), 1, t.text.size(), stdout);
          std::fflush(stdout);
          return true;
        });
    std::printf("\n");
    std::fprintf(stderr, "[%zu tokens, stopped by %s]\n", r.tokens.size(),
                 r.context_full ? "context full" : synapse::stop_reason_name(r.stop_reason));
    return 0;
  } catch (const synapse::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {  // std::stoi on a bad MAX_TOKENS
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
