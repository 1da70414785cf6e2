// issue 25: a chat reply cut short by -n never got its end-of-turn token in
// the KV cache, so the next turn continued a conversation other than the one
// the template shows (llama.cpp fixed the same in PR #8296). `synapse chat`
// runs two turns with -n 8; the second reply must be the greedy continuation
// of `turn 1 + reply 1 + end-of-turn + turn 2`, computed here from the
// library's forward pass token by token.
#include <gtest/gtest.h>

#include <algorithm>

#include "cli_util.hpp"
#include "golden_util.hpp"
#include "synapse/chat.hpp"
#include "synapse/generation.hpp"
#include "synapse/synapse.hpp"

namespace synapse {
namespace {

using test::data_path;

// n greedy tokens after `ids` in a fresh sequence, and their text.
std::pair<std::vector<token_id>, std::string> greedy_after(Context& ctx, const std::vector<token_id>& ids, int n) {
  Sequence seq = ctx.new_sequence(256);
  std::span<const float> logits = ctx.decode(seq, ids);
  std::vector<token_id> out;
  std::string text;
  for (int i = 0; i < n; ++i) {
    const token_id t = sample_greedy(logits);
    out.push_back(t);
    text += ctx.tokenizer().token_to_piece(t, false);
    const token_id one[1] = {t};
    logits = ctx.decode(seq, one);
  }
  return {out, text};
}

std::vector<std::string> replies(const std::string& out) {
  // stdout: "\n> " REPLY "\n" for each turn, then "\n> \n" at end of input.
  std::vector<std::string> r;
  size_t at = out.find("\n> ");
  while (at != std::string::npos) {
    const size_t next = out.find("\n> ", at + 3);
    if (next == std::string::npos) break;
    r.push_back(out.substr(at + 3, next - (at + 3) - 1));  // minus the "\n" after the reply
    at = next;
  }
  return r;
}

TEST(ChatTurn, ReplyCutByNPredictStillEndsTheTurnInTheCache) {
  const Model model = Model::load(data_path("models/stories260K.gguf"));
  const Tokenizer& tok = model.tokenizer();
  Context ctx(model, 1);
  const ChatTemplate tmpl = chat_template_for_model(model.gguf());
  const ChatMessage user1{"user", "Tell me about a cat."}, user2{"user", "What did the cat do next?"};
  const int n = 8;  // with -n 6 this model happens to give the same second reply either way

  std::vector<token_id> ids = tokenize_segments(tok, format_chat_delta(tmpl, {}, user1, true), true);
  const auto [reply1, text1] = greedy_after(ctx, ids, n);
  ASSERT_TRUE(std::none_of(reply1.begin(), reply1.end(), [&](token_id t) { return tok.is_eog(t); }));
  const std::vector<ChatMessage> past{user1, {"assistant", text1}};
  ids.insert(ids.end(), reply1.begin(), reply1.end());
  ids.push_back(end_of_turn_token(tok));  // </s>: stories260K has no eot token
  const std::vector<token_id> turn2 = tokenize_segments(tok, format_chat_delta(tmpl, past, user2, true), false);
  ids.insert(ids.end(), turn2.begin(), turn2.end());
  const auto [reply2, text2] = greedy_after(ctx, ids, n);

  const std::string input = test::tmp_path("chat_input.txt");
  test::spit(input, user1.content + "\n" + user2.content + "\n");
  const test::CliResult r = test::synapse_cli("chat -m " + data_path("models/stories260K.gguf") + " -n " +
                                              std::to_string(n) + " --temp 0 -t 1 < " + input);
  std::remove(input.c_str());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<std::string> got = replies(r.out);
  ASSERT_EQ(got.size(), 2u) << r.out;
  EXPECT_EQ(got[0], text1);
  EXPECT_EQ(got[1], text2) << "the second turn did not continue `turn 1 + reply + end-of-turn`";
}

// issue 25: a single message longer than the context said "start a new
// session" although the session was empty. It is refused on its own, naming
// its size and the context, and the session goes on with the next message.
TEST(ChatTurn, MessageLongerThanTheContextIsRefusedAlone) {
  std::string long_message;
  for (int i = 0; i < 100; ++i) long_message += "the cat sat on the mat. ";
  const std::string input = test::tmp_path("chat_long_input.txt");
  test::spit(input, long_message + "\nTell me about a cat.\n");
  const test::CliResult r = test::synapse_cli("chat -m " + data_path("models/stories260K.gguf") +
                                              " -c 64 -n 4 --temp 0 -t 1 < " + input);
  std::remove(input.c_str());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("more than the context of 64 tokens holds; shorten it or raise -c"), std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("start a new session"), std::string::npos) << r.err;
  // stdout holds only the prompts ("\n> ") and the second message's reply.
  std::string reply = r.out;
  for (size_t at; (at = reply.find("\n> ")) != std::string::npos;) reply.erase(at, 3);
  reply.erase(std::remove(reply.begin(), reply.end(), '\n'), reply.end());
  EXPECT_FALSE(reply.empty()) << "the session did not go on to the second message: " << r.out;
}

}  // namespace
}  // namespace synapse
