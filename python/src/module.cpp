// _synapse: the Python extension module, pybind11 bindings over the public C++
// API (include/synapse/). It adds no engine code of its own: the pure-Python
// package synapse/ (llama-cpp-python's Llama class) is built on these names.
//
// Threading: every call that runs the model (Context.decode, the generation
// driver) releases the GIL; one Context must still be used by one thread at a
// time (the C++ Context is not thread-safe), which the Llama class guarantees
// by owning its Context and taking its lock around every use (a second
// thread that gets here anyway meets BusyGuard's error, not a data race).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <unistd.h>

#include <cstdio>

#include "bindings.hpp"
#include "synapse/chat.hpp"
#include "synapse/synapse.hpp"

namespace py = pybind11;

namespace synapse::python {
namespace {

// llama.cpp's gguf_kv_to_str for scalars, which llama_model_meta_val_str (and
// so llama-cpp-python's Llama.metadata) returns: integers in decimal, floats
// as std::to_string prints them, bools "true"/"false", strings as stored.
// Arrays are left out, as llama.cpp leaves them out of its metadata map.
std::optional<std::string> scalar_string(const gguf::Value& v) {
  using gguf::ValueType;
  switch (v.type) {
    case ValueType::UINT8: case ValueType::UINT16: case ValueType::UINT32: case ValueType::UINT64:
      return std::to_string(v.u);
    case ValueType::INT8: case ValueType::INT16: case ValueType::INT32: case ValueType::INT64:
      return std::to_string(v.i);
    case ValueType::FLOAT32: return std::to_string(static_cast<float>(v.f));
    case ValueType::FLOAT64: return std::to_string(v.f);
    case ValueType::BOOL: return std::string(v.b ? "true" : "false");
    case ValueType::STRING: return v.str;
    case ValueType::ARRAY: return std::nullopt;
  }
  return std::nullopt;
}

py::dict metadata(const Model& m) {
  py::dict d;
  for (const gguf::KeyValue& kv : m.gguf().metadata())
    if (auto s = scalar_string(kv.value)) d[py::str(kv.key)] = py::str(*s);
  return d;
}

// Model::load, with a missing file reported as synapse.FileNotFoundError (the
// library says Error(io) "PATH: cannot open: No such file or directory").
Model load_model(const std::string& path) {
  try {
    py::gil_scoped_release nogil;
    return Model::load(path);
  } catch (const Error& e) {
    if (e.code() == Errc::io && ::access(path.c_str(), F_OK) != 0) raise_not_found(e.what());
    throw;
  }
}

using Messages = std::vector<std::pair<std::string, std::string>>;

// The template for `name` (None: the model's own, chatml without one) and the
// messages as the library's ChatMessage list.
std::pair<ChatTemplate, std::vector<ChatMessage>> chat_input(const Model& m, const std::optional<std::string>& name,
                                                             const Messages& msgs) {
  std::vector<ChatMessage> v;
  for (const auto& [role, content] : msgs) v.push_back({role, content});
  return {chat_template_for_model(m.gguf(), name ? std::optional<std::string_view>(*name) : std::nullopt),
          std::move(v)};
}

py::bytes detokenize(const Model& m, const std::vector<token_id>& ids, bool special) {
  // llama_detokenize(remove_special = false, unparse_special = special), as
  // llama-cpp-python's Llama.detokenize calls it.
  return py::bytes(m.tokenizer().detokenize(ids, false, special));
}

}  // namespace

py::array logits_view(py::object self) {
  BoundContext& c = self.cast<BoundContext&>();
  if (c.last.empty())
    throw Error(Errc::invalid_argument, "logits: none to show (no decode yet, or a generation has run since the last one)");
  const py::ssize_t rows = static_cast<py::ssize_t>(c.last.size() / c.n_vocab);
  // A read-only NumPy array over the engine's buffer; `self` is its base, so
  // the Context lives as long as any view of it.
  py::array a(py::dtype::of<float>(), {rows, static_cast<py::ssize_t>(c.n_vocab)},
              {static_cast<py::ssize_t>(c.n_vocab * sizeof(float)), static_cast<py::ssize_t>(sizeof(float))},
              c.last.data(), self);
  py::detail::array_proxy(a.ptr())->flags &= ~py::detail::npy_api::NPY_ARRAY_WRITEABLE_;
  return a;
}

}  // namespace synapse::python

PYBIND11_MODULE(_synapse, m) {
  using namespace synapse;
  using namespace synapse::python;
  m.doc() = "pybind11 bindings over synapse's C++ API; use the `synapse` package (class Llama).";
  register_errors(m);

  py::class_<Model>(m, "Model", "A loaded GGUF model (weights mapped, zero-copy); synapse::Model.")
      .def_static("load", &load_model, py::arg("path"),
                  "Maps PATH and binds its weights. Raises FileNotFoundError (a synapse.Error) for a\n"
                  "missing file, synapse.FormatError / UnsupportedError for a bad or unknown one.")
      .def_property_readonly("architecture", &Model::architecture)
      .def_property_readonly("n_vocab", &Model::n_vocab)
      .def_property_readonly("n_embd", &Model::n_embd)
      .def_property_readonly("n_layer", &Model::n_layer)
      .def_property_readonly("n_ctx_train", &Model::n_ctx_train)
      .def_property_readonly("n_params", &Model::n_params)
      .def_property_readonly("weight_bytes", &Model::weight_bytes)
      .def_property_readonly(
          "kv_bytes_per_position", [](const Model& mo) { return mo.kv_bytes_per_position(); },
          "bytes of K and V one cached position takes (every layer), F16 cache")
      .def_property_readonly("chat_template", &Model::chat_template,
                             "tokenizer.chat_template (Jinja source) or None")
      .def_property_readonly("metadata", &metadata, "scalar GGUF metadata as {key: str}")
      .def_property_readonly("bos", [](const Model& mo) { return mo.tokenizer().bos(); })
      .def_property_readonly("eos", [](const Model& mo) { return mo.tokenizer().eos(); })
      .def_property_readonly("add_bos", [](const Model& mo) { return mo.tokenizer().add_bos(); })
      .def_property_readonly("pooling_type", [](const Model& mo) { return static_cast<int>(mo.pooling_type()); },
                             "<arch>.pooling_type (llama_pooling_type's value), -1 when absent")
      .def(
          "tokenize",
          [](const Model& mo, std::string_view text, bool add_special, bool parse_special) {
            return mo.tokenizer().tokenize(text, add_special, parse_special);
          },
          py::arg("text"), py::arg("add_special"), py::arg("parse_special"),
          "llama_tokenize(text, add_special, parse_special) -> list[int]")
      .def("detokenize", &detokenize, py::arg("ids"), py::arg("special") = false,
           "llama_detokenize(ids, remove_special=False, unparse_special=special) -> bytes")
      .def(
          "token_to_piece",
          [](const Model& mo, token_id id, bool special) { return py::bytes(mo.tokenizer().token_to_piece(id, special)); },
          py::arg("id"), py::arg("special") = false, "the bytes of one token; OutOfRangeError for a bad id")
      .def(
          "token_text",
          [](const Model& mo, token_id id) {
            mo.tokenizer().token_to_piece(id, true);  // Error(out_of_range) for a bad id
            return py::bytes(mo.tokenizer().text(id));
          },
          py::arg("id"), "the raw vocabulary string of a token")
      .def("is_eog", [](const Model& mo, token_id id) { return mo.tokenizer().is_eog(id); }, py::arg("id"));

  py::class_<Sequence>(m, "Sequence", "One sequence's KV cache and position (synapse::Sequence).")
      .def_property_readonly("n_past", &Sequence::n_past)
      .def_property_readonly("n_ctx", &Sequence::n_ctx)
      .def_property_readonly("capacity", &Sequence::capacity,
                             "positions its KV cache stores (n_ctx, or the sliding window)")
      .def("clear", &Sequence::clear, "forget every position; the next token is position 0")
      .def("truncate", &Sequence::truncate, py::arg("n_keep"),
           "forget positions [n_keep, n_past); InvalidArgumentError outside [0, n_past], or where the\n"
           "cache cannot be cut back to n_keep (rewind_point)")
      .def("fork", &Sequence::fork, py::arg("n_prefix"), "a new sequence sharing positions [0, n_prefix)")
      .def_property_readonly(
          "tokens",
          [](const Sequence& s) {
            const std::span<const token_id> t = s.tokens();
            return std::vector<token_id>(t.begin(), t.end());
          },
          "the token ids at positions [0, n_past) (-1: an embedding row), kept by the library")
      .def(
          "keep_common_prefix",
          [](Sequence& s, const std::vector<token_id>& prompt) { return s.keep_common_prefix(prompt); },
          py::arg("prompt"),
          "keeps the longest prefix of tokens that PROMPT starts with (at most len(PROMPT) - 1; when\n"
          "the cache cannot be cut back to it, the latest snapshot before it, else nothing), asks for a\n"
          "snapshot at len(PROMPT) - 1, and returns the positions kept")
      .def("rewind_point", &Sequence::rewind_point, py::arg("n_most"),
           "the largest n <= n_most that truncate(n) and fork(n) accept (a snapshot's position on a\n"
           "hybrid or sliding-window model)")
      .def_property_readonly("snapshot_positions", &Sequence::snapshot_positions,
                             "positions of the snapshots kept (hybrid and sliding-window models)");

  py::class_<BoundContext>(m, "Context", "A thread pool and logits buffer over a model (synapse::Context).")
      .def(py::init<const Model&, int>(), py::arg("model"), py::arg("n_threads") = 0,
           "n_threads <= 0: the number of physical cores")
      .def_property_readonly("n_threads", [](const BoundContext& c) { return c.ctx.n_threads(); })
      .def(
          "set_kv_types",
          [](BoundContext& c, long long type_k, long long type_v) {
            c.ctx.set_kv_types(ggml_type_from_id("type_k", type_k), ggml_type_from_id("type_v", type_v));
          },
          py::arg("type_k"), py::arg("type_v"),
          "KV cache row types of the sequences made from now on (GGML type ids: F16 1, BF16 30, Q8_0 8, Q4_0 2, "
          "Q5_0 6, IQ4_NL 20); InvalidArgumentError for any other")
      .def_property_readonly("type_k", [](const BoundContext& c) { return static_cast<int>(c.ctx.type_k()); })
      .def_property_readonly("type_v", [](const BoundContext& c) { return static_cast<int>(c.ctx.type_v()); })
      .def(
          "new_sequence", [](const BoundContext& c, int64_t n_ctx) { return c.ctx.new_sequence(n_ctx); },
          py::arg("n_ctx") = 0, "a new empty sequence of n_ctx positions (<= 0: training context, at most 4096)")
      .def(
          "decode",
          [](BoundContext& c, Sequence& seq, std::vector<token_id> tokens, bool all_logits) {
            BusyGuard guard(c.busy, "the Context");
            py::gil_scoped_release nogil;
            if (!all_logits) {
              c.last = c.ctx.decode(seq, tokens);
              return;
            }
            Batch batch;
            for (token_id t : tokens) batch.add(seq, t, true);
            c.last = c.ctx.decode(batch);
          },
          py::arg("seq"), py::arg("tokens"), py::arg("all_logits") = false,
          "Runs TOKENS on SEQ (GIL released). Context.logits becomes the last row's logits, or with\n"
          "all_logits one row per token (llama-cpp-python's logits_all; the same bits either way).")
      .def_property_readonly("has_logits", [](const BoundContext& c) { return !c.last.empty(); },
                             "whether `logits` has rows to show")
      .def(
          "embed",
          [](BoundContext& c, const std::vector<std::vector<token_id>>& inputs, int pooling, int embd_normalize,
             int64_t n_ctx) {
            BusyGuard guard(c.busy, "the Context");
            std::vector<Embedding> out;
            {
              py::gil_scoped_release nogil;
              out = c.ctx.embed(inputs, {static_cast<Pooling>(pooling), embd_normalize}, n_ctx);
            }
            py::list result;
            for (Embedding& e : out) result.append(py::make_tuple(std::move(e.rows), e.n_tokens));
            return result;
          },
          py::arg("inputs"), py::arg("pooling"), py::arg("embd_normalize"), py::arg("n_ctx"),
          "Context::embed (GIL released): per input (rows, n_tokens); rows one vector per token for\n"
          "pooling none (0), else one; pooling -1 takes the model's")
      .def_property_readonly("logits", &logits_view,
                             "the logits of the last decode, [rows, n_vocab] float32, a read-only view of\n"
                             "the engine's buffer (no copy), overwritten by the next decode");

  m.def("chat_template_names", [] {
    std::vector<std::string> out;
    for (std::string_view n : chat_template_names()) out.emplace_back(n);
    return out;
  });
  m.def(
      "tokenize_chat",
      [](const Model& mo, std::optional<std::string> name, const Messages& msgs, bool add_generation_prompt) {
        const auto [t, v] = chat_input(mo, name, msgs);
        return tokenize_chat(mo.tokenizer(), t, v, add_generation_prompt, true);
      },
      py::arg("model"), py::arg("name"), py::arg("messages"), py::arg("add_generation_prompt") = true,
      "The model's built-in chat template (or NAME) applied to [(role, content)], as token ids\n"
      "(template text parsed for special tokens, contents not).");
  m.def(
      "format_chat",
      [](const Model& mo, std::optional<std::string> name, const Messages& msgs, bool add_generation_prompt) {
        const auto [t, v] = chat_input(mo, name, msgs);
        return format_chat(t, v, add_generation_prompt);
      },
      py::arg("model"), py::arg("name"), py::arg("messages"), py::arg("add_generation_prompt") = true,
      "The prompt text of the template tokenize_chat uses.");

  bind_generation(m);
  bind_grammar(m);
  bind_chat(m);
  bind_reply(m);
}
