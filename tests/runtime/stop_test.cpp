// Stop strings over a stream of pieces, and the whole stopping rule over a
// real vocabulary.
#include "synapse/stop.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "golden_util.hpp"
#include "synapse/error.hpp"
#include "synapse/gguf.hpp"

namespace synapse {
namespace {

// Feeds pieces one by one and returns everything printed (flushing at the end
// when no stop string matched).
std::string stream(StopFilter& f, const std::vector<std::string>& pieces) {
  std::string out;
  for (const std::string& p : pieces) out += f.feed(p);
  out += f.flush();
  return out;
}

TEST(StopFilter, StopStringSplitAcrossPieces) {
  StopFilter f({"###"});
  EXPECT_EQ(f.feed("Hello #"), "Hello ");  // "#" may start "###": held
  EXPECT_EQ(f.feed("#"), "");
  EXPECT_FALSE(f.stopped());
  EXPECT_EQ(f.feed("# world"), "");  // completes "###": nothing of it printed
  EXPECT_TRUE(f.stopped());
  EXPECT_EQ(f.matched(), "###");
  EXPECT_EQ(f.feed("more"), "");
  EXPECT_EQ(f.flush(), "");
}

TEST(StopFilter, PartialMatchThatFailsIsPrinted) {
  StopFilter f({"###"});
  EXPECT_EQ(f.feed("a#"), "a");
  EXPECT_EQ(f.feed("#b"), "##b");  // "##b" cannot start "###" any more
  EXPECT_FALSE(f.stopped());
}

TEST(StopFilter, PartialMatchAtTheEndIsFlushed) {
  StopFilter f({"User:"});
  EXPECT_EQ(f.feed("x Us"), "x ");
  EXPECT_EQ(f.flush(), "Us");
  EXPECT_FALSE(f.stopped());
  StopFilter g({"User:"});
  EXPECT_EQ(stream(g, {"The ", "Use", "r", " said"}), "The User said");
}

TEST(StopFilter, EarliestStopWinsAndTextAfterIsDropped) {
  StopFilter f({"ND!", "END"});
  EXPECT_EQ(f.feed("aEND! tail"), "a");
  EXPECT_EQ(f.matched(), "END");
  StopFilter g({"STOP"});
  EXPECT_EQ(stream(g, {"foo ST", "OP bar"}), "foo ");
  // A held prefix of one stop string while another completes.
  StopFilter h({"abcd", "bc"});
  EXPECT_EQ(h.feed("xab"), "x");
  EXPECT_EQ(h.feed("c"), "a");
  EXPECT_EQ(h.matched(), "bc");
}

TEST(StopFilter, NoStopsPassesTextThrough) {
  StopFilter f;
  EXPECT_EQ(f.feed("abc"), "abc");
  StopFilter g({""});
  EXPECT_EQ(g.feed("abc"), "abc");
}

TEST(StopFilter, HoldsIncompleteUtf8) {
  StopFilter f;
  EXPECT_EQ(f.feed("caf\xC3"), "caf");
  EXPECT_EQ(f.feed("\xA9!"), "\xC3\xA9!");
  EXPECT_EQ(f.feed("\xE2\x82"), "");  // 2 of the 3 bytes of U+20AC
  EXPECT_EQ(f.feed("\xAC"), "\xE2\x82\xAC");
  EXPECT_EQ(f.feed("\xF0\x9F"), "");
  EXPECT_EQ(f.flush(), "\xF0\x9F");  // never completed: flushed as is
  EXPECT_EQ(f.feed("\xFF"), "\xFF");  // invalid byte: nothing to wait for
}

class StopperTest : public ::testing::Test {
 protected:
  void SetUp() override {
    file_ = std::make_unique<gguf::File>(
        gguf::File::open(test::data_path("tokenizer/vocab/ggml-vocab-llama-spm.gguf")));
    tok_ = std::make_unique<Tokenizer>(Tokenizer::from_gguf(*file_));
  }
  std::unique_ptr<gguf::File> file_;
  std::unique_ptr<Tokenizer> tok_;
};

TEST_F(StopperTest, StopStringAcrossTokens) {
  const std::vector<token_id> ids = tok_->tokenize("Hello world, how are you", false, false);
  ASSERT_GT(ids.size(), 4u);
  Stopper s(*tok_, {.n_predict = -1, .stops = {"lo wor"}});
  std::string out;
  for (token_id id : ids) {
    out += s.on_token(id);
    if (s.done()) break;
  }
  out += s.finish();
  EXPECT_TRUE(s.done());
  EXPECT_EQ(s.reason(), StopReason::stop_string);
  EXPECT_EQ(out, " Hel");  // SPM pieces keep their leading space
  EXPECT_THROW(s.on_token(ids[0]), Error);
}

TEST_F(StopperTest, EndOfGenerationAndNPredict) {
  const std::vector<token_id> ids = tok_->tokenize("one two three", false, false);
  ASSERT_GE(ids.size(), 3u);
  Stopper eog(*tok_, {});
  std::string out = eog.on_token(ids[0]);
  EXPECT_FALSE(eog.done());
  EXPECT_EQ(eog.on_token(tok_->eos()), "");  // not printed
  EXPECT_TRUE(eog.done());
  EXPECT_EQ(eog.reason(), StopReason::eog);
  EXPECT_EQ(eog.n_generated(), 1);
  EXPECT_EQ(out + eog.finish(), " one");

  Stopper n(*tok_, {.n_predict = 2, .stops = {}});
  n.on_token(ids[0]);
  EXPECT_FALSE(n.done());
  n.on_token(ids[1]);
  EXPECT_TRUE(n.done());
  EXPECT_EQ(n.reason(), StopReason::n_predict);
  EXPECT_STREQ(stop_reason_name(n.reason()), "n_predict");

  Stopper ignore(*tok_, {.n_predict = -1, .stops = {}, .ignore_eos = true});
  ignore.on_token(tok_->eos());
  EXPECT_FALSE(ignore.done());

  Stopper zero(*tok_, {.n_predict = 0, .stops = {}});
  EXPECT_TRUE(zero.done());
  Stopper bad(*tok_, {});
  EXPECT_THROW(bad.on_token(tok_->n_vocab()), Error);
}

TEST_F(StopperTest, PreservedControlTokensPrintAsTheirText) {
  // <s> (BOS) is a control token: "" unless preserved; </s> stays an end of
  // generation, preserved or not.
  const token_id bos = tok_->bos();
  ASSERT_EQ(tok_->token_to_piece(bos, false), "");
  Stopper plain(*tok_, {});
  EXPECT_EQ(plain.on_token(bos), "");
  Stopper kept(*tok_, {.n_predict = -1, .stops = {"<s>x"}, .ignore_eos = false, .preserved_tokens = {bos, tok_->eos()}});
  EXPECT_EQ(kept.on_token(bos), "");  // held: it may begin the stop string "<s>x"
  const std::string out = kept.on_token(tok_->tokenize("ok", false, false)[0]);
  EXPECT_EQ(out + kept.finish(), "<s> ok");
  Stopper eog(*tok_, {.n_predict = -1, .stops = {}, .ignore_eos = false, .preserved_tokens = {tok_->eos()}});
  EXPECT_EQ(eog.on_token(tok_->eos()), "");
  EXPECT_EQ(eog.reason(), StopReason::eog);
}

TEST_F(StopperTest, HeldTextIsFlushedWhenTheReplyEndsOtherwise) {
  const std::vector<token_id> ids = tok_->tokenize("Hello User", false, false);
  Stopper s(*tok_, {.n_predict = -1, .stops = {"User:"}});
  std::string out;
  for (token_id id : ids) out += s.on_token(id);
  EXPECT_EQ(out, " Hello ");  // " User" could still become "User:"
  s.on_token(tok_->eos());
  EXPECT_EQ(out + s.finish(), " Hello User");
  EXPECT_EQ(s.finish(), "");  // once
}

}  // namespace
}  // namespace synapse
