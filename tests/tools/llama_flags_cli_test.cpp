// llama.cpp's command lines in synapse (issue 48, the command line): every
// flag of llama.cpp v0.5.0's --help for the tool a subcommand stands for is
// accepted or refused naming itself (tests/data/llama_help/, provenance in
// tests/data/PROVENANCE.md); each class of flag (mapped, ignored with one
// warning, refused, repeated, out of range) on real runs; prompt input as
// llama.cpp takes it (-f, -bf, escapes, special tokens, --verbose-prompt,
// --display-prompt, -r).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "cli_util.hpp"
#include "golden_util.hpp"

namespace synapse {
namespace {

using test::CliResult;
using test::data_path;
using test::synapse_cli;
using test::tmp_path;

const std::string kModel = data_path("models/stories260K.gguf");

std::vector<std::string> lines_of(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// One flag of a --help text: its spellings and its value placeholder ("N",
// "FNAME", "[on|off|auto]", "" for none).
struct HelpFlag {
  std::vector<std::string> names;
  std::string placeholder;
};

bool is_flag_name(const std::string& t) {
  if (t.size() < 2 || t[0] != '-') return false;
  const size_t start = t[1] == '-' ? 2 : 1;
  if (start >= t.size() || !std::isalnum(static_cast<unsigned char>(t[start]))) return false;
  for (size_t i = start; i < t.size(); ++i)
    if (!std::isalnum(static_cast<unsigned char>(t[i])) && t[i] != '-' && t[i] != '.') return false;
  return true;
}

// The flags of a llama.cpp --help text: common/arg.cpp's layout (names and
// placeholder in the first 40 columns, or alone on a longer line) and
// llama-bench's and llama-quantize's ("  -r, --repetitions <n>   ...").
std::vector<HelpFlag> help_flags(const std::string& text) {
  std::vector<HelpFlag> out;
  for (std::string line : lines_of(text)) {
    std::string head;
    if (line.rfind("  -", 0) == 0) {
      line = line.substr(2);
      head = line.substr(0, line.find("  "));
    } else if (!line.empty() && line[0] == '-' && line.rfind("-----", 0) != 0) {
      head = line.size() > 40 && line[38] == ' ' && line[39] == ' ' ? line.substr(0, 40) : line;
    } else {
      continue;
    }
    HelpFlag f;
    std::istringstream in(head);
    for (std::string t; in >> t;) {
      if (!t.empty() && t.back() == ',') t.pop_back();
      if (f.placeholder.empty() && is_flag_name(t)) f.names.push_back(t);
      else f.placeholder += (f.placeholder.empty() ? "" : " ") + t;
    }
    if (!f.names.empty()) out.push_back(f);
  }
  return out;
}

// A value the flag's parser takes (for flags whose value synapse reads while
// parsing: a grammar, a schema, a logit bias), else one from the placeholder.
std::string value_for(const std::string& name, const std::string& ph, const std::string& json_file,
                      const std::string& gbnf_file) {
  if (name == "--grammar") return "root ::= \"a\"";
  if (name == "-j" || name == "--json-schema" || name == "--chat-template-kwargs") return "{}";
  if (name == "-jf" || name == "--json-schema-file") return json_file;
  if (name == "--grammar-file") return gbnf_file;
  if (name == "-l" || name == "--logit-bias") return "1+1";
  if (name == "--reasoning-format") return "auto";
  if (name == "--port") return "8080";
  if (name == "-pg") return "1,1";
  if (ph.find("on|off") != std::string::npos) return "off";
  if (ph.rfind("<0|1>", 0) == 0) return "0";
  if (ph.find("FNAME") != std::string::npos || ph.find("FILE") != std::string::npos ||
      ph.find("PATH") != std::string::npos)
    return kModel;
  return "1";
}

struct ToolCase {
  const char* help;        // tests/data/llama_help/<help>.txt
  const char* command;     // synapse's subcommand standing for it
  const char* base;        // the rest of a valid command line
  size_t min_flags;        // the help file parses to at least this many spellings
};

class LlamaHelpFlags : public ::testing::TestWithParam<ToolCase> {};

// Tests that start a process per case run every case in the Release suite;
// under ASan/UBSan (a process start costs ~100x there) they run every
// kSanitizedStride-th case, which still reaches each tool's parser and each
// class of flag, in the suite's second pass.
constexpr size_t kSanitizedStride = SYNAPSE_TEST_SANITIZED ? 8 : 1;

// Each spelling of each flag, alone after a valid command line, with a
// value: exit 0 (used, mapped, accepted or ignored with the warning), or an
// error whose first line names the flag. The command line is only read
// (SYNAPSE_CLI_PARSE_ONLY), so the flag's effect is not run here; the tests
// below run each class.
TEST_P(LlamaHelpFlags, EachIsAcceptedOrRefusedNamingItself) {
  const ToolCase& c = GetParam();
  const std::vector<HelpFlag> flags = help_flags(test::slurp(data_path(std::string("llama_help/") + c.help + ".txt")));
  const std::string json_file = tmp_path("schema.json"), gbnf_file = tmp_path("g.gbnf");
  test::spit(json_file, "{}");
  test::spit(gbnf_file, "root ::= \"a\"\n");
  size_t n = 0, n_ok = 0;
  for (const HelpFlag& f : flags) {
    for (const std::string& name : f.names) {
      if (name == "-h" || name == "--help" || name == "--usage" || name == "--version") continue;
      if (n++ % kSanitizedStride != 0) continue;
      std::string base = c.base;
      for (size_t at; (at = base.find("{M}")) != std::string::npos;) base.replace(at, 3, kModel);
      std::string args = std::string(c.command) + " " + base + " " + name;
      if (!f.placeholder.empty()) args += " " + shell_quote(value_for(f.names.back(), f.placeholder, json_file, gbnf_file));
      const CliResult r = synapse_cli(args, "SYNAPSE_CLI_PARSE_ONLY=1");
      const std::vector<std::string> err = lines_of(r.err);
      if (r.exit_code == 0) {
        ++n_ok;
        EXPECT_LE(err.size(), 1u) << args << "\n" << r.err;  // at most the warning line
      } else {
        ASSERT_FALSE(err.empty()) << args;
        EXPECT_NE(err[0].find(name), std::string::npos) << args << "\n" << r.err;
        EXPECT_EQ(err[0].find("Could not convert"), std::string::npos) << args << "\n" << r.err;
      }
    }
  }
  EXPECT_GE(n, c.min_flags);
  if (kSanitizedStride == 1) {
    EXPECT_GT(n_ok, 0u);  // (a sample may hold refused flags only)
  }
  std::remove(json_file.c_str());
  std::remove(gbnf_file.c_str());
}

INSTANTIATE_TEST_SUITE_P(
    Cli, LlamaHelpFlags,
    ::testing::Values(ToolCase{"llama-completion", "run", "-m {M} -p hi", 240},
                      ToolCase{"llama-cli", "chat", "-m {M}", 330}, ToolCase{"llama-server", "serve", "-m {M}", 380},
                      ToolCase{"llama-perplexity", "perplexity", "-m {M}", 190},
                      ToolCase{"llama-tokenize", "tokenize", "-m {M} -p hi", 180},
                      ToolCase{"llama-bench", "bench", "-m {M}", 55},
                      // parse only: the output is never written
                      ToolCase{"llama-quantize", "quantize", "{M} never-written.gguf Q8_0", 15}),
    [](const auto& info) { return std::string(info.param.command); });

// ---- each class of flag on a real run ----

std::string run_cmd(const std::string& flags) {
  return "run -m " + kModel + " -p \"Once upon a time\" -n 12 --temp 0 -t 1 " + flags;
}

TEST(LlamaFlags, MappedShortFlagsMeanTheirLongNames) {
  const CliResult a = synapse_cli(run_cmd("-ub 3 -cnv -sys \"Be brief\" --chat-template chatml"));
  const CliResult b = synapse_cli(run_cmd("--ubatch-size 3 --chat --system-prompt \"Be brief\" --chat-template chatml"));
  ASSERT_EQ(a.exit_code, 0) << a.err;
  EXPECT_EQ(a.out, b.out);
  EXPECT_EQ(a.err.find("ignoring"), std::string::npos) << a.err;
  // -no-cnv, the default here: the plain prompt.
  EXPECT_EQ(synapse_cli(run_cmd("-no-cnv")).out, synapse_cli(run_cmd("")).out);
}

TEST(LlamaFlags, FlagsWithNoEffectAreIgnoredWithOneWarning) {
  const CliResult base = synapse_cli(run_cmd(""));
  const CliResult r = synapse_cli(run_cmd("-ngl 99 -fa on --mlock --no-mmap -co -dev none -sm none -ts 3,1 -mg 0 -nkvo "
                                          "--log-disable --no-warmup -tb 2 -ctk f16"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, base.out);
  const std::vector<std::string> err = lines_of(r.err);
  ASSERT_EQ(err.size(), lines_of(base.err).size() + 1) << r.err;
  EXPECT_EQ(err[0],
            "synapse run: ignoring llama.cpp flags that have no effect here (CPU only, no network): -ngl 99, -fa on, "
            "--mlock, --no-mmap, -co, -dev none, -sm none, -ts 3,1, -mg 0, -nkvo, --log-disable, --no-warmup, -tb 2");
  // -fa as older READMEs write it, with no value, before another flag.
  const CliResult bare = synapse_cli("run -m " + kModel + " -fa -p \"Once upon a time\" -n 12 --temp 0 -t 1");
  ASSERT_EQ(bare.exit_code, 0) << bare.err;
  EXPECT_EQ(bare.out, base.out);
  // bench and perplexity the same way.
  const CliResult b = synapse_cli("bench -m " + kModel + " -p 8 -n 0 -r 1 -t 1 -ngl 99 -fa 1 -mmp 0 -o jsonl");
  ASSERT_EQ(b.exit_code, 0) << b.err;
  EXPECT_NE(b.err.find("ignoring llama.cpp flags that have no effect here (CPU only, no network): -ngl 99, -fa 1, -mmp 0"),
            std::string::npos)
      << b.err;
}

// llama.cpp reads a long flag's '_' as '-' (common/arg.cpp, parse_cli_args):
// llama.cpp's server tests start llama-server with --backend_sampling.
TEST(LlamaFlags, UnderscoresInALongFlagAreDashes) {
  const CliResult base = synapse_cli(run_cmd(""));
  const CliResult r = synapse_cli(run_cmd("--backend_sampling --top_k 40 --ubatch_size=3"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, base.out);
  EXPECT_EQ(lines_of(r.err)[0],
            "synapse run: ignoring llama.cpp flags that have no effect here (CPU only, no network): --backend-sampling")
      << r.err;
  // A short flag keeps its spelling: -b_s is no flag.
  EXPECT_NE(synapse_cli(run_cmd("-b_s")).exit_code, 0);
}

TEST(LlamaFlags, DownloadsAndMissingFeaturesAreRefusedNamingTheFlag) {
  for (const char* flags : {"-hf ggml-org/gemma-3-1b-it-GGUF", "-hfr a/b", "-hff x.gguf", "-mu http://x/y.gguf",
                            "--model-url http://x/y.gguf"}) {
    const CliResult r = synapse_cli(run_cmd(flags));
    EXPECT_NE(r.exit_code, 0) << flags;
    EXPECT_TRUE(r.out.empty()) << r.out;
    const std::string name = std::string(flags).substr(0, std::string(flags).find(' '));
    EXPECT_EQ(lines_of(r.err)[0], name + ": synapse downloads nothing; give -m FILE, a local GGUF file") << r.err;
  }
  const CliResult lora = synapse_cli(run_cmd("--lora x.gguf"));
  EXPECT_NE(lora.exit_code, 0);
  EXPECT_EQ(lines_of(lora.err)[0].rfind("--lora: not supported", 0), 0u) << lora.err;
  // A KV cache type the command does not take (tokenize keeps no cache), a
  // sampler synapse does not have.
  EXPECT_NE(synapse_cli("tokenize -m " + kModel + " -p hi -ctk q8_0").err.find("-ctk: not supported by this command"),
            std::string::npos);
  EXPECT_NE(synapse_cli(run_cmd("--mirostat 2")).exit_code, 0);
  // ... unless the value asks for what synapse does.
  const CliResult off = synapse_cli(run_cmd("--mirostat 0 -ctv f16 --top-nsigma -1 -gan 1"));
  EXPECT_EQ(off.exit_code, 0) << off.err;
  EXPECT_EQ(off.err.find("ignoring"), std::string::npos) << off.err;
  // bench refuses -hf as llama-bench spells it too.
  EXPECT_NE(synapse_cli("bench -m " + kModel + " -hf a/b").err.find("-hf: synapse downloads nothing"), std::string::npos);
}

TEST(LlamaFlags, ARepeatedFlagTakesItsLastValue) {
  const CliResult last = synapse_cli("run -m " + kModel + " -p \"Once upon a time\" -n 3 -n 12 --temp 1 --temp 0 -t 1");
  ASSERT_EQ(last.exit_code, 0) << last.err;
  EXPECT_EQ(last.out, synapse_cli(run_cmd("")).out);
  EXPECT_NE(last.err.find("generated 12 tokens"), std::string::npos) << last.err;
  // -c twice, -ub twice (through the table).
  const CliResult c = synapse_cli(run_cmd("-c 8 -c 256 -ub 1 -ub 4"));
  ASSERT_EQ(c.exit_code, 0) << c.err;
  EXPECT_NE(c.err.find("n_ctx 256"), std::string::npos) << c.err;
  // List flags keep every value: two -p lists run both in bench.
  const CliResult b = synapse_cli("bench -m " + kModel + " -p 4 -p 8 -n 0 -r 1 -t 1 -o jsonl");
  ASSERT_EQ(b.exit_code, 0) << b.err;
  EXPECT_EQ(lines_of(b.out).size(), 2u) << b.out;
}

TEST(LlamaFlags, NumericRangesAreCheckedNamingTheFlag) {
  const struct {
    const char* flags;
    const char* message;
  } cases[] = {
      {"-c -5", "-c/--ctx-size: must be at least 0, got -5"},
      {"-n -3", "-n/--n-predict: must be at least -2, got -3"},
      {"-ub 0", "-ub (--ubatch-size): must be at least 1, got 0"},
      {"-b 0", "-b/--batch-size: must be at least 1, got 0"},
      {"-t -1", "-t/--threads: must be at least 0"},
      {"--top-p 1.5", "--top-p: must be at most 1, got 1.5"},
      {"--min-p -0.1", "--min-p: must be at least 0, got -0.1"},
      {"--repeat-penalty -1", "--repeat-penalty: must be at least 0"},
      {"--repeat-last-n -2", "--repeat-last-n: must be at least -1, got -2"},
      {"--temp nan", "--temp: 'nan' is not a finite number"},
      {"-fa maybe", "-fa: unknown value 'maybe' (on, off or auto)"},
  };
  for (const auto& c : cases) {
    const CliResult r = synapse_cli(run_cmd(c.flags));
    EXPECT_NE(r.exit_code, 0) << c.flags;
    EXPECT_TRUE(r.out.empty()) << c.flags;
    EXPECT_EQ((lines_of(r.err).empty() ? "" : lines_of(r.err)[0]).rfind(c.message, 0), 0u) << c.flags << "\n" << r.err;
  }
  const CliResult s = synapse_cli("serve -m " + kModel + " -c -1");
  EXPECT_NE(s.err.find("-c/--ctx-size: must be at least 0, got -1"), std::string::npos) << s.err;
  const CliResult np = synapse_cli("serve -m " + kModel + " -np 0");
  EXPECT_NE(np.err.find("-np (--parallel)"), std::string::npos) << np.err;
}

// ---- prompt input ----

TEST(LlamaFlags, PromptFromAFileLessOneTrailingNewline) {
  const std::string path = tmp_path("prompt.txt");
  test::spit(path, "Once upon a time\n");
  const CliResult f = synapse_cli("run -m " + kModel + " -f " + path + " -n 12 --temp 0 -t 1");
  ASSERT_EQ(f.exit_code, 0) << f.err;
  EXPECT_EQ(f.out, synapse_cli(run_cmd("")).out);
  // -bf keeps the newline; the last of -p, -f and -bf given wins.
  const CliResult bf = synapse_cli("run -m " + kModel + " -bf " + path + " -n 12 --temp 0 -t 1 --verbose-prompt");
  ASSERT_EQ(bf.exit_code, 0) << bf.err;
  EXPECT_NE(bf.err.find("number of tokens in prompt = "), std::string::npos);
  EXPECT_NE(synapse_cli("run -m " + kModel + " -p x -f " + path + " -n 12 --temp 0 -t 1").out,
            synapse_cli("run -m " + kModel + " -f " + path + " -p x -n 12 --temp 0 -t 1").out);
  EXPECT_EQ(synapse_cli("run -m " + kModel + " -p x -f " + path + " -n 12 --temp 0 -t 1").out, f.out);
  // chat: -f is the first message, -st ends the session after its reply.
  const std::string log = tmp_path("conversation.txt");
  const CliResult c = synapse_cli("chat -m " + kModel + " -f " + path + " -st -n 8 --temp 0 -t 1 -o " + log + " </dev/null");
  ASSERT_EQ(c.exit_code, 0) << c.err;
  EXPECT_EQ(c.out.rfind("\n> Once upon a time\n", 0), 0u) << c.out;
  // -o: the conversation as llama-cli writes it.
  const std::string reply = c.out.substr(std::string("\n> Once upon a time\n").size());
  EXPECT_EQ(test::slurp(log), "User:\nOnce upon a time\n\nAssistant:\n" + reply.substr(0, reply.size() - 2) + "\n\n");
  std::remove(log.c_str());
  const CliResult missing = synapse_cli("run -m " + kModel + " -f " + tmp_path("no-such.txt"));
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("-f: cannot open"), std::string::npos) << missing.err;
  std::remove(path.c_str());
}

// llama-cli's /read FILE: the file's text goes before the next message.
TEST(LlamaFlags, ChatReadCommandAddsAFile) {
  const std::string doc = tmp_path("doc.txt"), input = tmp_path("input.txt"), log = tmp_path("chat.txt");
  test::spit(doc, "Once upon a time\n");
  test::spit(input, "/read " + doc + "\nGo on.\n/read " + tmp_path("no-such.txt") + "\n");
  const CliResult r = synapse_cli("chat -m " + kModel + " -n 4 --temp 0 -t 1 -o " + log + " <" + input);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("loaded text from '" + doc + "'"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("cannot be opened: '" + tmp_path("no-such.txt") + "'"), std::string::npos) << r.err;
  EXPECT_EQ(test::slurp(log).rfind("User:\n--- File: " + doc + " ---\nOnce upon a time\nGo on.\n\nAssistant:\n", 0), 0u)
      << test::slurp(log);
  for (const std::string& f : {doc, input, log}) std::remove(f.c_str());
}

TEST(LlamaFlags, EscapesAreProcessedUnlessNoEscape) {
  // "\x20" is a space and "\t" a tab, as llama.cpp's string_process_escapes reads them.
  const CliResult e = synapse_cli("run -m " + kModel + " -p 'Once\\x20upon a\\ttime' -n 1 --temp 0 -t 1 --verbose-prompt");
  ASSERT_EQ(e.exit_code, 0) << e.err;
  EXPECT_NE(e.err.find("synapse: prompt: 'Once upon a\ttime'"), std::string::npos) << e.err;
  const CliResult raw = synapse_cli("run -m " + kModel + " -p 'Once\\x20upon' -n 1 --temp 0 -t 1 --verbose-prompt --no-escape");
  EXPECT_NE(raw.err.find("synapse: prompt: 'Once\\x20upon'"), std::string::npos) << raw.err;
  // Unknown escapes stay as they are; \\ is one backslash.
  const CliResult k = synapse_cli("run -m " + kModel + " -p 'a\\qb\\\\c' -n 1 -t 1 --verbose-prompt");
  EXPECT_NE(k.err.find("synapse: prompt: 'a\\qb\\c'"), std::string::npos) << k.err;
}

TEST(LlamaFlags, SpecialTokensInThePromptAreParsedUnlessNoParseSpecial) {
  // stories260K's <s> (id 1) written in the prompt: a BOS token, as llama-completion tokenizes it.
  const CliResult p = synapse_cli("run -m " + kModel + " -p '<s>Once' -n 1 -t 1 --verbose-prompt");
  ASSERT_EQ(p.exit_code, 0) << p.err;
  EXPECT_NE(p.err.find("number of tokens in prompt = "), std::string::npos);
  EXPECT_NE(p.err.find("     1 -> '<s>'\n     1 -> '<s>'\n"), std::string::npos) << p.err;
  const CliResult t = synapse_cli("run -m " + kModel + " -p '<s>Once' -n 1 -t 1 --verbose-prompt --no-parse-special");
  EXPECT_EQ(t.err.find("     1 -> '<s>'\n     1 -> '<s>'\n"), std::string::npos) << t.err;
}

TEST(LlamaFlags, DisplayPromptAndReversePrompt) {
  const CliResult base = synapse_cli(run_cmd(""));
  const CliResult d = synapse_cli(run_cmd("--display-prompt"));
  ASSERT_EQ(d.exit_code, 0) << d.err;
  EXPECT_EQ(d.out, " Once upon a time" + base.out);  // the prompt's pieces, as llama-completion prints them
  // -r stops after the text and prints it (llama-completion); --stop does not print it.
  const CliResult r = synapse_cli("run -m " + kModel + " -p \"Once upon a time\" -n 64 --temp 0 -t 1 -r Lily");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, ", there was a little girl named Lily\n");
}

// Command lines from llama.cpp v0.5.0's READMEs and docs (tools/*/README.md,
// docs/build.md, docs/multi-gpu.md), as written but for the model (the
// bundled one), the subcommand standing for the tool, -r 1 for llama-bench
// (one run per test), -c 256 where a line generates until the context is full
// (to keep the test short) and an input file that stays in a temporary folder.
// Each runs, or is refused with an error naming the flag synapse lacks.
TEST(LlamaFlags, LlamaCppReadmeCommandLinesRunAsWritten) {
  namespace fs = std::filesystem;
  const fs::path dir = tmp_path("readme");
  fs::create_directories(dir);
  const std::string f32 = (dir / "input-model-f32.gguf").string();
  fs::copy_file(data_path("models/tiny-llama-f32.gguf"), f32, fs::copy_options::overwrite_existing);
  const std::string m = kModel;
  const struct {
    std::string args;
    const char* refused;  // the flag named by the error, or nullptr: runs
  } lines[] = {
      // tools/completion/README.md (llama-completion)
      {"run -m " + m + " -no-cnv --prompt \"Once upon a time\" -c 256", nullptr},
      {"run -m " + m + " --jinja --single-turn -sys \"You are a helpful assistant\" -p \"Hello\" -c 256", nullptr},
      {"run -m " + m + " --ignore-eos -n -1 -c 256", nullptr},
      // docs/build.md, docs/multi-gpu.md (llama-cli)
      {"chat -m " + m + " -ngl 100 -c 16384 -t 10 -n -2 -cnv", nullptr},
      {"chat -m " + m + " -p \"Hi you how are you\" -ngl 99 -c 256", nullptr},
      {"chat -m " + m + " -p \"Building a website can be done in 10 steps:\" -n 50", nullptr},
      {"chat -m " + m + " -ts 3,1", nullptr},
      {"chat -m " + m + " -dev CUDA1", nullptr},
      {"chat -m " + m + " -sm tensor -ctk f16 -ctv f16", nullptr},
      {"chat -hf ggml-org/gemma-3-1b-it-GGUF -ngl 99 --rpc 192.168.88.10:50052,192.168.88.11:50052", "-hf"},
      // tools/llama-bench/README.md
      {"bench -m " + m + " -m " + m + " -p 0 -n 128,256,512 -r 1", nullptr},
      {"bench -m " + m + " -n 0 -p 1024 -b 128,256,512,1024 -r 1", nullptr},
      {"bench -m " + m + " -n 0 -n 16 -p 64 -t 1,2,4 -r 1", nullptr},
      {"bench -m " + m + " -ngl 10,20,30,31,32,33,34,35 -p 16 -n 4 -r 1", nullptr},
      {"bench -m " + m + " -d 0,512 -p 64 -n 16 -r 1", nullptr},
      {"bench -m " + m + " -o csv -p 16 -n 4 -r 1", nullptr},
      {"bench -m " + m + " -o sql -p 16 -n 4 -r 1", nullptr},
      // tools/quantize/README.md
      {"quantize " + f32 + " q4_k_m 8", nullptr},
      {"quantize --allow-requantize --leave-output-tensor --pure " + f32 + " q4_k_m 8", nullptr},
      {"quantize --imatrix imatrix.gguf --include-weights attn_v --output-tensor-type q5_k --token-embedding-type "
       "q3_k --keep-split " + f32 + " q4_k_m 8",
       "--include-weights"},
      {"quantize --output-tensor-type q5_k --token-embedding-type q3_k --keep-split " + f32 + " q4_k_m 8", nullptr},
      // tools/perplexity (llama-perplexity), tools/tokenize
      {"perplexity -m " + m + " -f " + data_path("text/wikitext-2-test.first100k.raw") + " -c 128 --chunks 2", nullptr},
      {"tokenize -m " + m + " -p \"Hello world\" --ids --log-disable", nullptr},
  };
  size_t i = 0;
  for (const auto& l : lines) {
    // Under sanitizers every 8th line, and every refused one (they parse only).
    if (i++ % kSanitizedStride != 0 && l.refused == nullptr) continue;
    const CliResult r = synapse_cli(l.args + " </dev/null");
    if (l.refused == nullptr) {
      EXPECT_EQ(r.exit_code, 0) << l.args << "\n" << r.err;
    } else {
      EXPECT_NE(r.exit_code, 0) << l.args;
      EXPECT_EQ(lines_of(r.err)[0].rfind(l.refused, 0), 0u) << l.args << "\n" << r.err;
    }
  }
  if (kSanitizedStride == 1) {
    EXPECT_TRUE(fs::exists(dir / "ggml-model-Q4_K_M.gguf"));
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace synapse
