// The reply parser: OutputStream, the one engine behind streaming and
// parse_output (what is decided, what is held), the family's detection and
// the call ids. The families' readers: chat_output_readers.cpp. See
// chat_output.hpp.
#include "runtime/chat_output.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <initializer_list>
#include <optional>
#include <utility>

#include "runtime/chat_output_readers.hpp"
#include "runtime/utf8.hpp"
#include "synapse/error.hpp"

namespace synapse::runtime {

namespace {

using namespace readers;
constexpr size_t npos = std::string_view::npos;

// The longest suffix of s that is a proper prefix of m: text that may still
// become the marker.
size_t partial_suffix(std::string_view s, std::string_view m) {
  for (size_t n = std::min(s.size(), m.size() - 1); n > 0; --n)
    if (s.substr(s.size() - n) == m.substr(0, n)) return n;
  return 0;
}


// How much of the end of `s` to hold while more text may come: a partial
// marker, a partial UTF-8 character, and (ws) the whitespace before them,
// which is dropped if a marker follows.
size_t hold_length(std::string_view s, const std::vector<std::string_view>& markers, bool ws) {
  size_t h = incomplete_utf8_tail(s);
  for (std::string_view m : markers) h = std::max(h, partial_suffix(s, m));
  if (ws)
    while (h < s.size() && is_ws(s[s.size() - 1 - h])) ++h;
  return h;
}

// gpt-oss (harmony): the markers of a message.
constexpr std::string_view kStart = "<|start|>";
constexpr std::string_view kChannel = "<|channel|>";
constexpr std::string_view kMessage = "<|message|>";
constexpr std::array<std::string_view, 4> kHarmonyEnds = {"<|end|>", "<|call|>", "<|return|>", "<|start|>"};

uint64_t splitmix64(uint64_t& x) {
  uint64_t z = (x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace

const char* format_name(ToolCallFormat f) {
  using F = ToolCallFormat;
  switch (f) {
    case F::none: return "none";
    case F::generic: return "generic";
    case F::llama3_json: return "llama3_json";
    case F::hermes: return "hermes";
    case F::qwen3_coder_xml: return "qwen3_coder_xml";
    case F::mistral_nemo: return "mistral_nemo";
    case F::mistral: return "mistral";
    case F::mistral_call_id: return "mistral_call_id";
    case F::gpt_oss_harmony: return "gpt_oss_harmony";
    case F::deepseek_r1: return "deepseek_r1";
    case F::deepseek_v3_1: return "deepseek_v3_1";
    case F::kimi_k2: return "kimi_k2";
    case F::glm_4_5: return "glm_4_5";
    case F::minimax_m2: return "minimax_m2";
    case F::functionary_v3_1: return "functionary_v3_1";
    case F::firefunction_v2: return "firefunction_v2";
    case F::nemotron_v2: return "nemotron_v2";
    case F::apriel: return "apriel";
    case F::granite: return "granite";
    case F::command_r7b: return "command_r7b";
  }
  return "?";
}

std::vector<std::string_view> marker_token_texts(ToolCallFormat f) {
  using F = ToolCallFormat;
  std::vector<std::string_view> m = {"<think>", "</think>"};
  const auto add = [&](std::initializer_list<std::string_view> more) { m.insert(m.end(), more); };
  switch (f) {
    case F::none:
    case F::generic:
    case F::firefunction_v2: break;
    case F::llama3_json:
    case F::functionary_v3_1: add({"<|python_tag|>"}); break;
    case F::hermes:
    case F::qwen3_coder_xml: add({"<tool_call>", "</tool_call>"}); break;
    case F::mistral_nemo:
    case F::mistral:
    case F::mistral_call_id: m = {"[TOOL_CALLS]", "[ARGS]", "[CALL_ID]", "[THINK]", "[/THINK]"}; break;
    case F::gpt_oss_harmony: add({"<|channel|>", "<|constrain|>", "<|message|>", "<|start|>", "<|end|>"}); break;
    case F::deepseek_r1:
    case F::deepseek_v3_1:
      add({"<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>", "<｜tool▁sep｜>", "<｜tool▁call▁end｜>",
           "<｜tool▁calls▁end｜>"});
      break;
    case F::kimi_k2:
      add({"<|tool_calls_section_begin|>", "<|tool_call_begin|>", "<|tool_call_argument_begin|>", "<|tool_call_end|>",
           "<|tool_calls_section_end|>"});
      break;
    case F::glm_4_5:
      add({"<tool_call>", "</tool_call>", "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>"});
      break;
    case F::minimax_m2: add({"<minimax:tool_call>", "</minimax:tool_call>"}); break;
    case F::nemotron_v2: add({"<TOOLCALL>", "</TOOLCALL>"}); break;
    case F::apriel: add({"<tool_calls>", "</tool_calls>"}); break;
    case F::granite: add({"<|tool_call|>", "<response>", "</response>"}); break;
    case F::command_r7b:
      m = {"<|START_ACTION|>", "<|END_ACTION|>", "<|START_THINKING|>", "<|END_THINKING|>",
           "<|START_RESPONSE|>", "<|END_RESPONSE|>", "<|START_TEXT|>", "<|END_TEXT|>"};
      break;
  }
  return m;
}

ToolCallFormat detect_format(std::string_view src, std::string_view architecture) {
  using F = ToolCallFormat;
  const auto has = [&](std::string_view s) { return src.find(s) != npos; };
  if (trim(src).empty()) {
    if (architecture == "gpt-oss") return F::gpt_oss_harmony;
    if (architecture == "qwen2" || architecture == "qwen3" || architecture == "qwen3moe") return F::hermes;
    return F::generic;
  }
  // The order is llama.cpp's where families share a marker: a more specific
  // family first.
  if (has("<|channel|>")) return F::gpt_oss_harmony;
  if (has("[TOOL_CALLS]")) {
    if (has("[CALL_ID]")) return F::mistral_call_id;
    return has("[ARGS]") ? F::mistral : F::mistral_nemo;
  }
  if (has("<|tool_calls_section_begin|>")) return F::kimi_k2;
  if (has("tool▁calls▁begin") || has("tool▁call▁begin")) return has("```json") ? F::deepseek_r1 : F::deepseek_v3_1;
  if (has("<minimax:tool_call>")) return F::minimax_m2;
  if (has("]<]minimax[>[")) return F::generic;  // MiniMax-M3's namespaced markup: not covered
  if (has("<arg_key>") && has("<tool_call>")) return F::glm_4_5;
  if (has("<tool_call>") && has("<function=") && has("<parameter=")) return F::qwen3_coder_xml;
  if (has("<TOOLCALL>")) return F::nemotron_v2;
  if (has("<|START_ACTION|>")) return F::command_r7b;
  if (has("<tool_calls>")) return F::apriel;  // Apriel (and MiniMax-M1) name <tool_call> too
  if (has("<tool_call>")) return F::hermes;
  if (has("<|tool_call|>")) return F::granite;
  if (has("functools[")) return F::firefunction_v2;
  if (has("<function=") && has("<|start_header_id|>")) return F::functionary_v3_1;
  if (has("<|start_header_id|>") && has("ipython")) return F::llama3_json;
  return F::generic;
}

ReasoningFormat parse_reasoning_format(std::string_view name) {
  if (name == "none") return ReasoningFormat::none;
  if (name == "deepseek" || name == "deepseek-legacy") return ReasoningFormat::deepseek;
  if (name == "auto") return ReasoningFormat::automatic;
  throw Error(Errc::invalid_argument,
              "reasoning_format: '" + std::string(name) + "' is not one of none, deepseek, auto");
}

bool prompt_opens_reasoning(ToolCallFormat f, std::string_view prompt) {
  const std::string_view p = rtrim(prompt);
  const auto ends_with = [&](std::string_view m) { return p.size() >= m.size() && p.substr(p.size() - m.size()) == m; };
  if (f == ToolCallFormat::gpt_oss_harmony) return ends_with("<|channel|>analysis<|message|>");
  for (std::string_view m : spec_of(f, false).reasoning_starts)
    if (ends_with(m)) return true;
  return false;
}

std::string make_tool_call_id(ToolCallFormat f, uint64_t seed, size_t index) {
  static constexpr std::string_view kAlnum = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  const bool mistral =
      f == ToolCallFormat::mistral_nemo || f == ToolCallFormat::mistral || f == ToolCallFormat::mistral_call_id;
  uint64_t state = seed ^ (0xD1B54A32D192ED03ull * (index + 1));
  std::string id = mistral ? "" : "call_";
  const size_t n = mistral ? 9 : 24;
  uint64_t bits = 0;
  for (size_t i = 0; i < n; ++i) {
    if (i % 10 == 0) bits = splitmix64(state);  // 10 draws of 6 bits per word
    id += kAlnum[(bits & 63) % kAlnum.size()];
    bits >>= 6;
  }
  return id;
}

void apply_delta(ParsedOutput& out, const Delta& d) {
  switch (d.kind) {
    case Delta::Kind::content: out.content += d.text; break;
    case Delta::Kind::reasoning: out.reasoning_content += d.text; break;
    case Delta::Kind::tool_call:
      if (out.tool_calls.size() <= d.index) out.tool_calls.resize(d.index + 1);
      out.tool_calls[d.index].id = d.id;
      out.tool_calls[d.index].name = d.name;
      break;
    case Delta::Kind::arguments:
      if (out.tool_calls.size() <= d.index) out.tool_calls.resize(d.index + 1);
      out.tool_calls[d.index].arguments += d.text;
      break;
  }
}

// ---------------------------------------------------------------------------
// The engine. `buf` holds what is not decided yet; step() decides what it
// can and says whether to go on. With `final` every branch decides.

struct OutputStream::State {
  enum class Mode { start, reasoning, content, harmony_header, harmony_body, plain };
  enum class Body { content, reasoning, call, dropped };

  ToolCallFormat format;
  ParseOptions opt;
  Spec spec;
  Tools tools;
  bool extract = true;  // reasoning goes to reasoning_content

  std::string buf;
  Mode mode = Mode::start;
  bool finished = false;
  bool drop_ws = false;          // drop whitespace at the head (after </think>)
  bool reasoning_head = false;   // at the start of a reasoning block
  bool content_started = false;  // content written: start-only triggers are out
  bool start_checked = false;    // the start-only triggers were tried
  bool calls_seen = false;
  size_t n_calls = 0;
  // harmony
  Body body = Body::content;
  std::string call_name;
  std::string_view raw_end;  // reasoning_format none: the end marker of an analysis message is content

  std::vector<Delta> out;
  std::vector<std::string_view> trigger_markers;
  bool has_start_triggers = false;

  State(ToolCallFormat f, ParseOptions o)
      : format(f), opt(std::move(o)), spec(spec_of(f, opt.tools_offered)), tools(opt.tools) {
    extract = opt.reasoning_format != ReasoningFormat::none;
    for (const Trigger& t : spec.triggers) {
      if (!t.at_start) trigger_markers.push_back(t.marker);
      has_start_triggers = has_start_triggers || t.at_start;
    }
    for (std::string_view d : spec.dropped) trigger_markers.push_back(d);
    if (format == ToolCallFormat::gpt_oss_harmony) {
      mode = Mode::harmony_header;
      if (opt.thinking_open) {
        mode = Mode::harmony_body;
        body = extract ? Body::reasoning : Body::content;
      }
    } else if (opt.thinking_open) {
      mode = Mode::reasoning;
      reasoning_head = true;
    }
  }

  void emit(Delta::Kind kind, std::string_view text) {
    if (text.empty()) return;
    if (!out.empty() && out.back().kind == kind) {
      out.back().text += text;
      return;
    }
    Delta d;
    d.kind = kind;
    d.text = std::string(text);
    out.push_back(std::move(d));
  }
  void emit_content(std::string_view t) { emit(Delta::Kind::content, t); }
  void emit_reasoning(std::string_view t) { emit(extract ? Delta::Kind::reasoning : Delta::Kind::content, t); }
  void emit_call(RawCall c) {
    calls_seen = true;
    if (!opt.parallel_tool_calls && n_calls >= 1) return;
    Delta d;
    d.kind = Delta::Kind::tool_call;
    d.index = n_calls;
    d.id = c.id.empty() ? make_tool_call_id(format, opt.id_seed, n_calls) : c.id;
    d.name = c.name;
    out.push_back(d);
    d.kind = Delta::Kind::arguments;
    d.id.clear();
    d.name.clear();
    d.text = dump(c.arguments);
    out.push_back(std::move(d));
    ++n_calls;
  }
  void emit_section(Section& sec) {
    emit_content(sec.content);
    for (RawCall& c : sec.calls) emit_call(std::move(c));
  }
  void consume(size_t n) { buf.erase(0, n); }

  // Tries the trigger at buf[at]: ok consumes the section (and what is before
  // it, whitespace), no writes the marker as content, more waits.
  M try_section(const Trigger& t, size_t at, bool final) {
    Section sec;
    size_t end = 0;
    const M m = read_section(t.reader, tools, buf, at + (t.keep ? 0 : t.marker.size()), final, &sec, &end);
    if (m == M::ok) {
      consume(end);
      emit_section(sec);
      start_checked = true;
    } else if (m == M::no) {
      emit_content(std::string_view(buf).substr(0, at + t.marker.size()));
      consume(at + t.marker.size());
      content_started = true;
    }
    return m;
  }

  bool step(bool final) {
    switch (mode) {
      case Mode::start: return step_start(final);
      case Mode::reasoning: return step_reasoning(final);
      case Mode::content: return step_content(final);
      case Mode::harmony_header: return step_harmony_header(final);
      case Mode::harmony_body: return step_harmony_body(final);
      case Mode::plain:
        emit_content(buf.substr(0, buf.size() - (final ? 0 : incomplete_utf8_tail(buf))));
        consume(buf.size() - (final ? 0 : incomplete_utf8_tail(buf)));
        return false;
    }
    return false;
  }

  // The start of the reply: a reasoning block, or content.
  bool step_start(bool final) {
    const size_t j = skip_ws(buf, 0);
    if (j == buf.size() && !final) return false;
    const std::string_view rest = std::string_view(buf).substr(j);
    for (std::string_view m : spec.reasoning_starts) {
      if (rest.substr(0, m.size()) == m) {
        if (!extract) emit_content(std::string_view(buf).substr(0, j + m.size()));
        consume(j + m.size());
        mode = Mode::reasoning;
        reasoning_head = true;
        return true;
      }
      if (!final && m.substr(0, rest.size()) == rest) return false;
    }
    mode = Mode::content;
    return true;
  }

  bool step_reasoning(bool final) {
    if (extract && reasoning_head) {
      consume(skip_ws(buf, 0));
      if (buf.empty()) return false;
    }
    reasoning_head = false;
    size_t best = npos;
    const EndMarker* end = nullptr;
    for (const EndMarker& e : spec.reasoning_ends) {
      const size_t f = buf.find(e.text);
      if (f < best || (f == best && f != npos && e.text.size() > end->text.size())) {
        best = f;
        end = &e;
      }
    }
    if (end != nullptr) {
      const std::string_view text = std::string_view(buf).substr(0, best);
      const size_t used = best + (end->consumed ? end->text.size() : 0);
      if (extract) {
        emit_reasoning(rtrim(text));
      } else {
        emit_content(std::string_view(buf).substr(0, used));
      }
      consume(used);
      mode = Mode::content;
      drop_ws = extract;
      return true;
    }
    std::vector<std::string_view> ends;
    for (const EndMarker& e : spec.reasoning_ends) ends.push_back(e.text);
    size_t n = buf.size();
    if (!final) n -= hold_length(buf, ends, extract);
    const std::string_view text = std::string_view(buf).substr(0, n);
    emit_reasoning(extract && final ? rtrim(text) : text);
    consume(n);
    return false;
  }

  bool step_content(bool final) {
    if (drop_ws) {
      consume(skip_ws(buf, 0));
      if (buf.empty()) return false;
      drop_ws = false;
    }
    if (buf.empty()) return false;
    // Triggers that count only at the start of the content (a JSON reply).
    if (!start_checked && !content_started && has_start_triggers) {
      const size_t j = skip_ws(buf, 0);
      if (j == buf.size() && !final) return false;
      const std::string_view rest = std::string_view(buf).substr(j);
      for (const Trigger& t : spec.triggers) {
        if (!t.at_start) continue;
        if (rest.substr(0, t.marker.size()) == t.marker) {
          const M m = try_section(t, j, final);
          if (m == M::more) return false;
          start_checked = true;
          return true;
        }
        if (!final && t.marker.substr(0, rest.size()) == rest) return false;
      }
      start_checked = true;
    }
    // The earliest marker anywhere.
    size_t best = npos;
    const Trigger* trig = nullptr;
    std::string_view dropped;
    for (const Trigger& t : spec.triggers) {
      if (t.at_start) continue;
      const size_t f = buf.find(t.marker);
      if (f < best) best = f, trig = &t, dropped = {};
    }
    for (std::string_view d : spec.dropped) {
      const size_t f = buf.find(d);
      if (f < best) best = f, trig = nullptr, dropped = d;
    }
    if (best != npos) {
      if (trig == nullptr) {  // a marker around content: dropped
        emit_content(std::string_view(buf).substr(0, best));
        content_started = content_started || best > 0;
        consume(best + dropped.size());
        return true;
      }
      size_t k = best;
      while (k > 0 && is_ws(buf[k - 1])) --k;  // whitespace before a call is dropped
      emit_content(std::string_view(buf).substr(0, k));
      content_started = content_started || k > 0;
      consume(k);
      return try_section(*trig, best - k, final) != M::more;
    }
    if (final) {
      // Whitespace that only follows the calls is not content.
      if (!(calls_seen && trim(buf).empty())) emit_content(buf);
      content_started = true;
      buf.clear();
      return false;
    }
    // Whitespace is held only where a call may follow it (and drop it).
    const size_t n = buf.size() - hold_length(buf, trigger_markers, !spec.triggers.empty());
    emit_content(std::string_view(buf).substr(0, n));
    content_started = content_started || n > 0;
    consume(n);
    return false;
  }

  // gpt-oss: [<|start|>assistant] then a header up to <|message|>: a
  // channel (<|channel|>analysis, commentary, final), a recipient
  // (" to=functions.N", in the role part or after the channel) and a
  // constraint (" <|constrain|>json").
  bool step_harmony_header(bool final) {
    // Whitespace before a header (a reply may start with some), but the
    // space of " to=".
    if (size_t j = skip_ws(buf, 0); j > 0) {
      if (j == buf.size() && !final) return false;
      const std::string_view r = std::string_view(buf).substr(j);
      if (buf[j - 1] == ' ' && !final && r.size() < 3 && std::string_view("to=").substr(0, r.size()) == r)
        return false;
      consume(buf[j - 1] == ' ' && r.substr(0, 3) == "to=" ? j - 1 : j);
    }
    if (buf.empty()) return false;
    const std::string_view b = buf;
    if (b.substr(0, kStart.size()) == kStart) {
      size_t i = kStart.size();
      while (i < b.size() && std::isalpha(static_cast<unsigned char>(b[i]))) ++i;
      if (i == b.size() && !final) return false;
      consume(i);
      return true;
    }
    if (!final && b.size() < kStart.size() && kStart.substr(0, b.size()) == b) return false;
    // A header begins with <|channel|> or " to="; anything else is text
    // outside the format, kept as content.
    bool header = false;
    for (std::string_view h : {kChannel, std::string_view(" to=")}) {
      if (b.substr(0, h.size()) == h) header = true;
      if (!final && b.size() < h.size() && h.substr(0, b.size()) == b) return false;
    }
    if (!header) {
      mode = Mode::plain;
      return true;
    }
    const size_t m = b.find(kMessage);
    if (m == npos) {
      if (!final) return false;
      consume(buf.size());  // a header cut short says nothing
      return false;
    }
    const std::string_view head = b.substr(0, m);
    std::string channel, recipient;
    for (size_t c = head.find(kChannel); c != npos; c = head.find(kChannel, c + 1)) {
      size_t e = c + kChannel.size();
      while (e < head.size() && std::isalnum(static_cast<unsigned char>(head[e]))) ++e;
      channel = std::string(head.substr(c + kChannel.size(), e - c - kChannel.size()));
    }
    for (size_t t = head.find("to="); t != npos; t = head.find("to=", t + 1)) {
      size_t e = t + 3;
      while (e < head.size() && !is_ws(head[e]) && head[e] != '<') ++e;
      const std::string r(head.substr(t + 3, e - t - 3));
      if (r != "assistant") recipient = r;
    }
    raw_end = {};
    if (!recipient.empty()) {
      if (recipient.rfind("functions.", 0) == 0) {
        call_name = recipient.substr(10);
        body = opt.tools_offered ? Body::call : Body::content;
      } else {
        body = Body::dropped;  // a builtin tool's (browser, python): not the user's
      }
    } else if (channel == "analysis") {
      body = Body::reasoning;
      if (!extract) {
        emit_content(b.substr(0, m + kMessage.size()));
        raw_end = "<|end|>";
      }
    } else {
      body = Body::content;
    }
    consume(m + kMessage.size());
    mode = Mode::harmony_body;
    return true;
  }

  bool step_harmony_body(bool final) {
    size_t best = npos;
    std::string_view end;
    for (std::string_view e : kHarmonyEnds) {
      const size_t f = buf.find(e);
      if (f < best) best = f, end = e;
    }
    if (best == npos && !final) {
      if (body == Body::call) return false;  // a call is decided when whole
      std::vector<std::string_view> ends(kHarmonyEnds.begin(), kHarmonyEnds.end());
      const size_t n = buf.size() - hold_length(buf, ends, false);
      deliver(std::string_view(buf).substr(0, n));
      consume(n);
      return false;
    }
    const size_t n = best == npos ? buf.size() : best;
    deliver(std::string_view(buf).substr(0, n), true);
    if (best != npos && !raw_end.empty() && end == raw_end) emit_content(end);
    consume(n + (best != npos && end != kStart ? end.size() : 0));
    mode = Mode::harmony_header;
    return best != npos;
  }

  void deliver(std::string_view text, bool whole = false) {
    switch (body) {
      case Body::content: emit_content(text); break;
      case Body::reasoning: emit_reasoning(text); break;
      case Body::dropped: break;
      case Body::call: {
        if (!whole) break;
        auto args = parse_json(trim(text));
        if (args && args->is_object() && tools.known(call_name)) {
          emit_call(RawCall{{}, call_name, std::move(*args)});
        } else {
          emit_content(text);
        }
        break;
      }
    }
  }

  std::vector<Delta> run(bool final) {
    while (step(final)) {
    }
    if (final && !buf.empty()) {  // every mode decides all at the end; this is a guard
      emit_content(buf);
      buf.clear();
    }
    return std::move(out);
  }
};

OutputStream::OutputStream(ToolCallFormat format, ParseOptions options)
    : s_(std::make_unique<State>(format, std::move(options))) {}
OutputStream::~OutputStream() = default;
OutputStream::OutputStream(OutputStream&&) noexcept = default;
OutputStream& OutputStream::operator=(OutputStream&&) noexcept = default;

std::vector<Delta> OutputStream::feed(std::string_view piece) {
  if (s_->finished) throw Error(Errc::invalid_argument, "OutputStream::feed after finish");
  s_->buf.append(piece);
  s_->out.clear();
  return s_->run(false);
}

std::vector<Delta> OutputStream::finish() {
  if (s_->finished) return {};
  s_->finished = true;
  s_->out.clear();
  return s_->run(true);
}

ParsedOutput parse_output(ToolCallFormat format, std::string_view text, const ParseOptions& options) {
  OutputStream stream(format, options);
  ParsedOutput out;
  for (const Delta& d : stream.feed(text)) apply_delta(out, d);
  for (const Delta& d : stream.finish()) apply_delta(out, d);
  return out;
}

}  // namespace synapse::runtime
