// The embedding and rerank bodies and replies (server/embedding.hpp) against
// llama-server v0.5.0's shapes: the key order of its (ordered) JSON, base64 of
// the float bytes, rerank results best first and cut to top_n, the errors in
// its words.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>

#include "golden_util.hpp"
#include "server/embedding.hpp"
#include "server/request.hpp"

namespace synapse::server {
namespace {

using nlohmann::json;

TEST(EmbeddingShapes, Base64OfTheFloatBytes) {
  const float x[2] = {1.0f, -2.5f};  // 00 00 80 3f, 00 00 20 c0
  EXPECT_EQ(base64_floats(x, 2), "AACAPwAAIMA=");
  EXPECT_EQ(base64_floats(x, 1), "AACAPw==");
  EXPECT_EQ(base64_floats(x, 0), "");
}

TEST(EmbeddingShapes, OpenAiReplyInLlamaServersOrder) {
  EmbeddingBody req;
  const std::vector<Embedding> out = {{{{0.5f, -0.25f}}, 3}, {{{1.0f, 0.0f}}, 2}};
  EXPECT_EQ(embeddings_oai_reply(req, out, "m").dump(),
            R"({"model":"m","object":"list","usage":{"prompt_tokens":5,"total_tokens":5},"data":[)"
            R"({"embedding":[0.5,-0.25],"index":0,"object":"embedding"},)"
            R"({"embedding":[1.0,0.0],"index":1,"object":"embedding"}]})");
  req.base64 = true;
  req.model = "asked";
  const auto b = embeddings_oai_reply(req, out, "m");
  EXPECT_EQ(b["model"], "asked");
  EXPECT_EQ(b["data"][1].dump(), R"({"embedding":"AACAPwAAAAA=","index":1,"object":"embedding","encoding_format":"base64"})");
  EXPECT_EQ(embeddings_native_reply(out).dump(), R"([{"index":0,"embedding":[[0.5,-0.25]]},{"index":1,"embedding":[[1.0,0.0]]}])");
}

TEST(EmbeddingShapes, RerankSortedCutAndTei) {
  RerankBody req;
  req.documents = {"a", "b", "c"};
  req.top_n = 2;
  const std::vector<float> scores = {0.25f, 0.75f, 0.25f};
  EXPECT_EQ(rerank_reply(req, scores, {4, 5, 6}, "m").dump(),
            R"({"model":"m","object":"list","usage":{"prompt_tokens":15,"total_tokens":15},"results":[)"
            R"({"index":1,"relevance_score":0.75},{"index":0,"relevance_score":0.25}]})");
  req.tei = true;
  req.return_text = true;
  req.top_n = 3;
  EXPECT_EQ(rerank_reply(req, scores, {4, 5, 6}, "m").dump(),
            R"([{"index":1,"score":0.75,"text":"b"},{"index":0,"score":0.25,"text":"a"},)"
            R"({"index":2,"score":0.25,"text":"c"}])");
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const HttpError& e) {
    EXPECT_EQ(e.status(), 400);
    return e.what();
  }
  return "no error";
}

TEST(EmbeddingShapes, BadBodiesInLlamaServersWords) {
  const Tokenizer tok = Tokenizer::from_gguf(gguf::File::open(test::data_path("models/stories260K.gguf")));
  auto emb = [&](const char* body) { return [&, body] { parse_embedding_body(json::parse(body), true, tok, 64, 2); }; };
  EXPECT_EQ(error_of(emb("{}")), "\"input\" or \"content\" must be provided");
  EXPECT_EQ(error_of(emb(R"({"input":"a","encoding_format":"x"})")),
            "The format to return the embeddings in. Can be either float or base64");
  EXPECT_NE(error_of(emb(R"({"input":"a","dimensions":32})")).find("embedding size 64"), std::string::npos);
  EXPECT_EQ(error_of(emb(R"({"input":["a",[]]})")), "Input content cannot be empty");
  auto rr = [&](const char* body) { return [&, body] { parse_rerank_body(json::parse(body), tok, std::nullopt); }; };
  EXPECT_EQ(error_of(rr(R"({"documents":["a"]})")), "\"query\" must be provided");
  EXPECT_EQ(error_of(rr(R"({"query":2,"documents":["a"]})")), "\"query\" must be a string");
  EXPECT_EQ(error_of(rr(R"({"query":"q","documents":["a",1]})")), "\"documents\" must be a non-empty string array");
  // Without a rerank template: BOS (add_bos), the query, the document (no EOS: add_eos is off).
  const RerankBody r = parse_rerank_body(json::parse(R"({"query":"Once","documents":["upon"]})"), tok, std::nullopt);
  std::vector<token_id> want = {tok.bos()};
  for (token_id t : tok.tokenize("Once", false, false)) want.push_back(t);
  for (token_id t : tok.tokenize("upon", false, false)) want.push_back(t);
  EXPECT_EQ(r.inputs.at(0), want);
  EXPECT_EQ(r.top_n, 1);
}

}  // namespace
}  // namespace synapse::server
