// `synapse chat` and `synapse run -cnv` with a Jinja chat template
// (--jinja, the default; --chat-template-file; --chat-template-kwargs): each
// reply must be the greedy continuation of the prompt the template renders,
// computed here from the library (JinjaChatTemplate, the forward pass) token
// by token. A later turn keeps what the cache holds and feeds only what the
// new message adds: llama.cpp's common_chat_format_single where the template
// renders the past the same way, the tokens that differ where it does not
// (Qwen3 rewrites the last reply once a message follows it).
#include <gtest/gtest.h>

#include <algorithm>

#include <nlohmann/json.hpp>

#include "cli_util.hpp"
#include "golden_util.hpp"
#include "synapse/chat.hpp"
#include "synapse/generation.hpp"
#include "synapse/synapse.hpp"

namespace synapse {
namespace {

using test::data_path;
using ojson = nlohmann::ordered_json;

const char* kQwen3 = "models/tiny-qwen3-q4_k_m.gguf";
const char* kQwen3Template = "templates/llama.cpp/Qwen-Qwen3-0.6B.jinja";
const char* kChatml =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + "
    "'\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

struct Reply {
  std::vector<token_id> tokens;
  std::string text;
  token_id eog = -1;  // the end-of-generation token it stopped at, or -1 (cut by n)
};

// At most n greedy tokens after `ids` in a fresh sequence (stopping at an
// end-of-generation token, as the CLI does).
Reply greedy_after(Context& ctx, const std::vector<token_id>& ids, int n) {
  Sequence seq = ctx.new_sequence(1024);
  std::span<const float> logits = ctx.decode(seq, ids);
  Reply r;
  for (int i = 0; i < n; ++i) {
    const token_id t = sample_greedy(logits);
    if (ctx.tokenizer().is_eog(t)) {
      r.eog = t;
      break;
    }
    r.tokens.push_back(t);
    r.text += ctx.tokenizer().token_to_piece(t, false);
    const token_id one[1] = {t};
    logits = ctx.decode(seq, one);
  }
  return r;
}

// stdout: "\n> " REPLY "\n" for each turn, then "\n> \n" at end of input.
std::vector<std::string> replies(const std::string& out) {
  std::vector<std::string> r;
  size_t at = out.find("\n> ");
  while (at != std::string::npos) {
    const size_t next = out.find("\n> ", at + 3);
    if (next == std::string::npos) break;
    r.push_back(out.substr(at + 3, next - (at + 3) - 1));
    at = next;
  }
  return r;
}

std::string messages(const std::vector<std::pair<std::string, std::string>>& msgs) {
  ojson j = ojson::array();
  for (const auto& [role, content] : msgs) j.push_back({{"role", role}, {"content", content}});
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// Two user turns through `synapse chat ARGS` with -n n --temp 0.
std::vector<std::string> chat_two_turns(const std::string& model_and_flags, const std::string& user1,
                                        const std::string& user2, int n, std::string* err = nullptr) {
  const std::string input = test::tmp_path("chat_jinja_input.txt");
  test::spit(input, user1 + "\n" + user2 + "\n");
  const test::CliResult r = test::synapse_cli("chat -m " + model_and_flags + " -n " + std::to_string(n) +
                                              " --temp 0 -t 1 < " + input);
  std::remove(input.c_str());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  if (err) *err = r.err;
  return replies(r.out);
}

TEST(ChatJinjaCli, LaterTurnFeedsWhatTheTemplateRewrote) {
  const Model model = Model::load(data_path(kQwen3));
  const Tokenizer& tok = model.tokenizer();
  Context ctx(model, 1);
  const std::string source = test::slurp(data_path(kQwen3Template));
  const std::optional<JinjaChatTemplate> t = JinjaChatTemplate::for_model(model.gguf(), tok, source);
  ASSERT_TRUE(t);
  const std::string u1 = "Tell me about a cat.", u2 = "What did the cat do next?";
  const int n = 8;

  const Reply r1 = greedy_after(ctx, tok.tokenize(t->apply(messages({{"user", u1}}), true), true, true), n);
  const std::string past = t->apply(messages({{"user", u1}, {"assistant", r1.text}}), false);
  const std::string full = t->apply(messages({{"user", u1}, {"assistant", r1.text}, {"user", u2}}), true);
  // Qwen3 writes the last reply with an empty <think> block, and not once a
  // user message follows: llama.cpp's byte delta would be cut at the wrong place.
  ASSERT_NE(full.compare(0, past.size(), past), 0);
  ASSERT_NE(past.find("<|im_start|>assistant\n<think>\n\n</think>\n\n"), std::string::npos) << past;
  ASSERT_EQ(full.find("<think>"), std::string::npos) << full;
  // The cache after turn 2's prompt holds exactly the new rendering's tokens.
  const Reply r2 = greedy_after(ctx, tok.tokenize(full, true, true), n);

  std::string err;
  const std::vector<std::string> got = chat_two_turns(
      data_path(kQwen3) + " --chat-template-file " + data_path(kQwen3Template), u1, u2, n, &err);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0], r1.text);
  EXPECT_EQ(got[1], r2.text);
  EXPECT_NE(err.find("template: Jinja, " + data_path(kQwen3Template)), std::string::npos) << err;
}

TEST(ChatJinjaCli, LaterTurnAddsCommonChatFormatSingle) {
  const Model model = Model::load(data_path(kQwen3));
  const Tokenizer& tok = model.tokenizer();
  Context ctx(model, 1);
  const JinjaChatTemplate t(kChatml, "", "");
  const std::string sys = "You are a cat.", u1 = "Tell me about a cat.", u2 = "What did the cat do next?";
  const int n = 8;

  // Turn 1 renders the system message too.
  std::vector<token_id> ids = tok.tokenize(t.apply(messages({{"system", sys}, {"user", u1}}), true), true, true);
  const Reply r1 = greedy_after(ctx, ids, n);
  ids.insert(ids.end(), r1.tokens.begin(), r1.tokens.end());
  ids.push_back(r1.eog >= 0 ? r1.eog : end_of_turn_token(tok));
  // Turn 2: render(past + new, true) minus render(past, false), after "\n".
  const std::string past = t.apply(messages({{"system", sys}, {"user", u1}, {"assistant", r1.text}}), false);
  const std::string full =
      t.apply(messages({{"system", sys}, {"user", u1}, {"assistant", r1.text}, {"user", u2}}), true);
  ASSERT_EQ(full.compare(0, past.size(), past), 0);
  ASSERT_EQ(past.back(), '\n');
  std::string delta = "\n";  // appended: GCC 12's -Wrestrict misfires on "\n" + std::string&& (bug 105329)
  delta.append(full, past.size());
  EXPECT_EQ(delta, "\n<|im_start|>user\n" + u2 + "<|im_end|>\n<|im_start|>assistant\n");
  const std::vector<token_id> turn2 = tok.tokenize(delta, false, true);
  ids.insert(ids.end(), turn2.begin(), turn2.end());
  const Reply r2 = greedy_after(ctx, ids, n);

  const std::string file = test::tmp_path("chatml.jinja");
  test::spit(file, kChatml);
  const std::vector<std::string> got =
      chat_two_turns(data_path(kQwen3) + " --chat-template-file " + file + " -sys \"" + sys + "\"", u1, u2, n);
  std::remove(file.c_str());
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0], r1.text);
  EXPECT_EQ(got[1], r2.text);
}

// Before the Jinja work the built-in path dropped -sys from the first turn
// (format_chat_delta took the system message as already in the cache).
TEST(ChatJinjaCli, BuiltInFirstTurnHoldsTheSystemMessage) {
  const Model model = Model::load(data_path("models/stories260K.gguf"));
  Context ctx(model, 1);
  const std::vector<ChatMessage> msgs{{"system", "You tell stories about dogs."}, {"user", "Tell me about a cat."}};
  const Reply r1 = greedy_after(ctx, tokenize_chat(model.tokenizer(), ChatTemplate::chatml, msgs, true, true), 8);
  const std::vector<std::string> got = chat_two_turns(
      data_path("models/stories260K.gguf") + " -sys \"" + msgs[0].content + "\"", msgs[1].content, "More.", 8);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0], r1.text);
}

TEST(ChatJinjaCli, RunCnvRendersTheTemplateWithItsKwargs) {
  const Model model = Model::load(data_path(kQwen3));
  const Tokenizer& tok = model.tokenizer();
  Context ctx(model, 1);
  const JinjaChatTemplate t(test::slurp(data_path(kQwen3Template)), "", "");
  const std::string msgs = messages({{"system", "Be brief."}, {"user", "Hi"}});
  const std::string off = t.apply(msgs, true, {}, R"({"enable_thinking": false})");
  // enable_thinking false: Qwen3's prompt closes an empty <think> block.
  ASSERT_EQ(off.substr(off.size() - 19), "<think>\n\n</think>\n\n");
  const Reply on = greedy_after(ctx, tok.tokenize(t.apply(msgs, true), true, true), 8);
  const Reply closed = greedy_after(ctx, tok.tokenize(off, true, true), 8);

  const std::string base = "run -m " + data_path(kQwen3) + " -p Hi -n 8 --temp 0 -t 1 -cnv -sys \"Be brief.\"" +
                           " --chat-template-file " + data_path(kQwen3Template);
  const test::CliResult a = test::synapse_cli(base);
  ASSERT_EQ(a.exit_code, 0) << a.err;
  EXPECT_EQ(a.out, on.text + "\n");
  const test::CliResult b = test::synapse_cli(base + " --chat-template-kwargs '{\"enable_thinking\": false}'");
  ASSERT_EQ(b.exit_code, 0) << b.err;
  EXPECT_EQ(b.out, closed.text + "\n");
  // --no-jinja: the built-in format detected in the file's text (chatml).
  const test::CliResult c = test::synapse_cli(base + " --no-jinja");
  ASSERT_EQ(c.exit_code, 0) << c.err;
  const std::vector<ChatMessage> pairs{{"system", "Be brief."}, {"user", "Hi"}};
  EXPECT_EQ(c.out, greedy_after(ctx, tokenize_chat(tok, ChatTemplate::chatml, pairs, true, true), 8).text + "\n");
}

TEST(ChatJinjaCli, TemplateErrorsAreOneLine) {
  const std::string model = data_path(kQwen3);
  const std::string broken = test::tmp_path("broken.jinja");
  test::spit(broken, "{% for m in messages %}{{ m.content }}");
  const test::CliResult a = test::synapse_cli("run -m " + model + " -p Hi -n 2 -cnv --chat-template-file " + broken);
  EXPECT_EQ(a.exit_code, 1);
  EXPECT_EQ(a.err.rfind("synapse: error: chat template (" + broken + "): template: line 1", 0), 0u) << a.err;
  EXPECT_EQ(std::count(a.err.begin(), a.err.end(), '\n'), 1) << a.err;
  std::remove(broken.c_str());

  const test::CliResult b =
      test::synapse_cli("run -m " + model + " -p Hi -n 2 -cnv --chat-template-kwargs '[1]' --chat-template-file " +
                        data_path(kQwen3Template));
  EXPECT_EQ(b.exit_code, 1);
  EXPECT_NE(b.err.find("--chat-template-kwargs: must be a JSON object"), std::string::npos) << b.err;
  const test::CliResult c = test::synapse_cli("run -m " + model + " -p Hi -cnv --chat-template chatml " +
                                              "--chat-template-file " + data_path(kQwen3Template));
  EXPECT_EQ(c.exit_code, 1);
  EXPECT_NE(c.err.find("pass one"), std::string::npos) << c.err;

  // A template that raises on a message: the message is refused with the
  // template's words and the session goes on.
  const std::string picky = test::tmp_path("picky.jinja");
  test::spit(picky, std::string("{% for m in messages %}{% if 'forbidden' in m.content %}"
                                "{{ raise_exception('no forbidden words') }}{% endif %}{% endfor %}") + kChatml);
  const std::string input = test::tmp_path("picky_input.txt");
  test::spit(input, "a forbidden word\nTell me about a cat.\n");
  const test::CliResult d =
      test::synapse_cli("chat -m " + model + " --chat-template-file " + picky + " -n 4 --temp 0 -t 1 < " + input);
  std::remove(picky.c_str());
  std::remove(input.c_str());
  EXPECT_EQ(d.exit_code, 0) << d.err;
  EXPECT_NE(d.err.find("synapse: error: chat template: no forbidden words"), std::string::npos) << d.err;
  // One refusal; stdout: the first prompt with no reply, then the second
  // message's reply and the prompt at end of input.
  size_t errors = 0;
  for (size_t at = 0; (at = d.err.find("synapse: error", at)) != std::string::npos; ++at) ++errors;
  EXPECT_EQ(errors, 1u) << d.err;
  EXPECT_EQ(d.out.rfind("\n> \n> ", 0), 0u) << d.out;
  size_t prompts = 0;
  for (size_t at = 0; (at = d.out.find("\n> ", at)) != std::string::npos; ++at) ++prompts;
  EXPECT_EQ(prompts, 3u) << d.out;
}

}  // namespace
}  // namespace synapse
