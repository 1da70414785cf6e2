// The table of llama.cpp's flags (llama_flags.hpp) and the pass that applies
// it before CLI11 parses. Rows are looked up by (subcommand, spelling); the
// first row that names both wins, and a flag the subcommand defines itself
// never reaches the table.
#include "llama_flags.hpp"

#include <algorithm>
#include <cstdint>
#include <string_view>

namespace synapse::tools {
namespace {

// Subcommands, as bits of a row's `cmds`.
enum : uint32_t {
  kRun = 1u << 0,
  kChat = 1u << 1,
  kServe = 1u << 2,
  kPerplexity = 1u << 3,
  kTokenize = 1u << 4,
  kBench = 1u << 5,
  kQuantize = 1u << 6,
  kLogits = 1u << 7,
  kInfo = 1u << 8,
  kSynth = 1u << 9,
  kImatrix = 1u << 10,
};
// The subcommands whose llama.cpp tool parses common/arg.cpp's table
// (llama-completion and llama-cli, llama-server, llama-perplexity,
// llama-tokenize, llama-imatrix): they take its common flags, used or not.
constexpr uint32_t kGen = kRun | kChat;
constexpr uint32_t kCommon = kRun | kChat | kServe | kPerplexity | kTokenize | kImatrix;

enum class Act { map, accept, ignore, refuse };
// A flag's value: none, one (the next argument, whatever it looks like, as
// llama.cpp takes it, or after '='), or an optional on|off|auto word (-fa,
// -co: a value in llama.cpp v0.5.0, a bare flag in older READMEs).
enum class Val { none, one, onoff };

struct Row {
  std::string_view names;  // llama.cpp's spellings, '|'-separated
  Val val;
  Act act;
  uint32_t cmds;
  std::string_view arg = {};   // map: synapse's flag; refuse: why
  std::string_view noop = {};  // refuse: '|'-separated values that ask for what synapse does (accepted)
};

constexpr std::string_view kDownload = "synapse downloads nothing; give -m FILE, a local GGUF file";
constexpr std::string_view kTextOnly = "not supported: synapse runs text-only models";
constexpr std::string_view kRope = "not supported: synapse uses the RoPE parameters stored in the GGUF file";
constexpr std::string_view kKvType = "not supported by this command (run, chat, serve, perplexity and bench take it)";
constexpr std::string_view kSpec = "not supported: synapse has no speculative decoding";
constexpr std::string_view kSampler = "not supported: synapse's samplers are penalties, top-k, typical, top-p, min-p and temperature";

// clang-format off
constexpr Row kRows[] = {
  // --- names llama.cpp spells with one dash and several letters, or long
  // names synapse spells otherwise, that have a meaning here.
  {"-ub",                        Val::one,  Act::map,    kRun | kServe | kLogits | kBench | kImatrix, "--ubatch-size"},
  {"-ofreq",                     Val::one,  Act::map,    kImatrix, "--output-frequency"},
  {"-sys",                       Val::one,  Act::map,    kGen, "--system-prompt"},
  {"-sysf",                      Val::one,  Act::map,    kGen, "--system-prompt-file"},
  {"-cnv|--conversation",        Val::none, Act::map,    kRun, "--chat"},
  {"-no-cnv|--no-conversation",  Val::none, Act::map,    kRun, "--no-chat"},
  {"-cnv|--conversation",        Val::none, Act::accept, kChat},
  {"-no-cnv|--no-conversation",  Val::none, Act::refuse, kChat, "synapse chat is conversation mode; synapse run generates from a prompt"},
  {"-i|--interactive|-if|--interactive-first", Val::none, Act::accept, kChat},
  {"-i|--interactive|-if|--interactive-first", Val::none, Act::refuse, kRun, "interactive mode is synapse chat"},
  {"-st",                        Val::none, Act::map,    kChat, "--single-turn"},
  {"-st|--single-turn",          Val::none, Act::accept, kRun},
  {"-mli",                       Val::none, Act::map,    kChat, "--multiline-input"},
  {"-bf",                        Val::one,  Act::map,    kGen, "--binary-file"},
  {"-sp",                        Val::none, Act::map,    kGen, "--special"},
  {"-np",                        Val::one,  Act::map,    kServe, "--parallel"},
  {"-ctk",                       Val::one,  Act::map,    kGen | kServe | kPerplexity | kBench, "--cache-type-k"},
  {"-ctv",                       Val::one,  Act::map,    kGen | kServe | kPerplexity | kBench, "--cache-type-v"},
  {"-to",                        Val::one,  Act::map,    kServe, "--timeout"},
  {"-jf",                        Val::one,  Act::map,    kGen | kServe, "--json-schema-file"},
  {"--cors-origins",             Val::one,  Act::map,    kServe, "--cors-origin"},
  {"-pg",                        Val::one,  Act::map,    kBench, "--pg"},
  {"-oe",                        Val::one,  Act::map,    kBench, "--output-err"},
  {"--no-context-shift",         Val::none, Act::accept, kRun | kServe | kPerplexity},
  {"--context-shift",            Val::none, Act::refuse, kRun | kServe, "not supported: synapse stops at a full context, as llama.cpp does by default"},
  {"--no-display-prompt",        Val::none, Act::accept, kChat},
  {"--parse-special",            Val::none, Act::accept, kTokenize},

  // --- refused: synapse downloads nothing and has no model cache.
  {"-hf|-hfr|--hf-repo|-hff|--hf-file|-mu|--model-url|-dr|--docker-repo|-hfd|-hfrd|--hf-repo-draft|--spec-draft-hf|-mmu|--mmproj-url",
                                 Val::one,  Act::refuse, kCommon | kBench, kDownload},
  {"-cl|--cache-list",           Val::none, Act::refuse, kCommon, "synapse keeps no model cache; give -m FILE"},
  {"--embd-gemma-default|--fim-qwen-1.5b-default|--fim-qwen-3b-default|--fim-qwen-7b-default|--fim-qwen-7b-spec|"
   "--fim-qwen-14b-spec|--fim-qwen-30b-default|--gpt-oss-20b-default|--gpt-oss-120b-default|"
   "--vision-gemma-4b-default|--vision-gemma-12b-default|--spec-default",
                                 Val::none, Act::refuse, kCommon, kDownload},
  {"--rpc",                      Val::one,  Act::refuse, kCommon | kBench, "not supported: synapse runs on this machine's CPU, with no RPC backends"},
  {"--completion-bash",          Val::none, Act::refuse, kCommon, "not provided by synapse"},
  {"--server-base",              Val::one,  Act::refuse, kChat, "not supported: synapse chat runs the model itself"},

  // --- refused: they would change the results, and synapse does not implement them.
  {"--rope-scaling",             Val::one,  Act::refuse, kCommon, kRope},
  {"--rope-scale|--rope-freq-base|--rope-freq-scale", Val::one, Act::refuse, kCommon, kRope},
  {"--yarn-orig-ctx",            Val::one,  Act::refuse, kCommon, kRope, "0"},
  {"--yarn-ext-factor|--yarn-attn-factor|--yarn-beta-slow|--yarn-beta-fast", Val::one, Act::refuse, kCommon, kRope, "-1|-1.0|-1.00"},
  {"-ctk|--cache-type-k|-ctv|--cache-type-v", Val::one, Act::refuse, kCommon | kBench, kKvType, "f16|F16"},
  {"--override-kv",              Val::one,  Act::refuse, kCommon | kQuantize, "not supported: synapse reads the metadata as stored in the file"},
  {"--lora|--lora-scaled|--control-vector|--control-vector-scaled", Val::one, Act::refuse, kCommon, "not supported: synapse loads no adapters or control vectors"},
  {"--control-vector-layer-range", Val::one, Act::refuse, kCommon, "not supported: synapse loads no control vectors"},
  {"-mm|--mmproj|--image|--audio|--video", Val::one, Act::refuse, kCommon, kTextOnly},
  {"--samplers",                 Val::one,  Act::refuse, kCommon, kSampler, "penalties;dry;top_n_sigma;top_k;typ_p;top_p;min_p;xtc;temperature"},
  {"--sampler-seq|--sampling-seq", Val::one, Act::refuse, kCommon, kSampler, "edskypmxt"},
  {"--top-nsigma|--top-n-sigma", Val::one,  Act::refuse, kCommon, kSampler, "-1|-1.0|-1.00"},
  {"--xtc-probability|--dry-multiplier|--dynatemp-range", Val::one, Act::refuse, kCommon, kSampler, "0|0.0|0.00"},
  {"--mirostat",                 Val::one,  Act::refuse, kCommon, kSampler, "0"},
  {"--adaptive-target",          Val::one,  Act::refuse, kCommon, kSampler, "-1|-1.0|-1.00"},
  {"-gan|--grp-attn-n",          Val::one,  Act::refuse, kGen, "not supported: synapse has no self-extend (group attention)", "1"},
  {"-md|--model-draft|--spec-draft-model", Val::one, Act::refuse, kCommon, kSpec},
  {"--spec-type",                Val::one,  Act::refuse, kCommon, kSpec, "none"},
  {"--reasoning-budget",         Val::one,  Act::refuse, kCommon, "not supported: synapse does not limit the reasoning of a reply", "-1"},
  {"-rea|--reasoning",           Val::onoff, Act::refuse, kCommon, "not supported: reasoning follows the chat template (--chat-template-kwargs '{\"enable_thinking\": false}' turns it off where the template reads it)", "auto"},
  {"--hellaswag|--winogrande|--multiple-choice", Val::none, Act::refuse, kPerplexity, "not supported: synapse perplexity scores text (-f) and KL divergence only"},
  {"--ppl-stride|--ppl-output-type", Val::one, Act::refuse, kPerplexity, "not supported: synapse perplexity scores llama-perplexity's default way", "0"},
  {"--in-prefix|--in-suffix",    Val::one,  Act::refuse, kGen, "not supported: synapse chat wraps messages in the chat template"},
  {"--in-prefix-bos",            Val::none, Act::refuse, kGen, "not supported: synapse chat wraps messages in the chat template"},
  {"--path|--api-prefix",        Val::one,  Act::refuse, kServe, "not supported: synapse serves its API routes only"},
  {"--ssl-key-file|--ssl-cert-file", Val::one, Act::refuse, kServe, "not supported: synapse serves plain HTTP; put a TLS proxy in front"},
  {"--tools|--tools-runtime|--mcp-servers-config|--mcp-servers-json", Val::one, Act::refuse, kServe, "not supported: synapse runs no tools itself"},
  {"-ag|--agent",                Val::none, Act::refuse, kServe, "not supported: synapse runs no tools itself"},
  {"--models-dir|--models-preset", Val::one, Act::refuse, kServe, "not supported: synapse serve serves the one model of -m"},
  {"--skip-chat-parsing",        Val::none, Act::refuse, kServe, "not supported: synapse parses replies by the chat format"},
  {"--skip-chat-parsing",        Val::none, Act::accept, kGen},  // they print the raw reply anyway
  {"-no-ag|--no-agent",          Val::none, Act::accept, kServe},
  {"--prompt-cache",             Val::one,  Act::refuse, kRun, "not supported: synapse saves no session files"},
  {"--prompt-cache-all|--prompt-cache-ro", Val::none, Act::refuse, kRun, "not supported: synapse saves no session files"},
  {"--include-weights|--exclude-weights", Val::one, Act::refuse, kQuantize, "not supported: synapse uses every entry of --imatrix"},
  {"--tensor-type|--tensor-type-file", Val::one, Act::refuse, kQuantize, "not supported: synapse quantize sets types per file type, --output-tensor-type and --token-embedding-type"},
  {"--prune-layers",             Val::one,  Act::refuse, kQuantize, "not supported: synapse quantize keeps every layer"},
  {"--dry-run",                  Val::none, Act::refuse, kQuantize, "not supported: synapse quantize writes the file"},
  {"-embd|--embeddings",         Val::one,  Act::refuse, kBench, "not supported: synapse has no embeddings mode", "0"},

  // --- ignored: hardware placement, offload, memory mapping, threads'
  // affinity, logging and display; nothing here changes a result.
  {"-ngl|--gpu-layers|--n-gpu-layers|-sm|--split-mode|-ts|--tensor-split|-mg|--main-gpu|-dev|--device|"
   "-ot|--override-tensor|-ncmoe|--n-cpu-moe|-ncffn|--n-cpu-ffn|-fitt|--fit-target|-fitc|--fit-ctx|"
   "-lm|--load-mode|-lzm|--lazy-mode|--numa|-tb|--threads-batch|-C|--cpu-mask|-Cr|--cpu-range|"
   "--cpu-strict|--prio|--poll|-Cb|--cpu-mask-batch|-Crb|--cpu-range-batch|--cpu-strict-batch|"
   "--prio-batch|--poll-batch|-dt|--defrag-thold|-hft|--hf-token|--log-file|-lv|--verbosity|--log-verbosity|"
   "-mmdev|--mmproj-device|-ctxcp|--ctx-checkpoints|--swa-checkpoints|-cram|--cache-ram",
                                 Val::one,  Act::ignore, kCommon},
  {"-fa|--flash-attn|-fit|--fit|-co|--color|--log-colors",
                                 Val::onoff, Act::ignore, kCommon},
  {"--swa-full|--perf|--no-perf|-kvo|--kv-offload|-nkvo|--no-kv-offload|--repack|-nr|--no-repack|"
   "--no-host|-nh|--list-devices|-cmoe|--cpu-moe|--check-tensors|--op-offload|--no-op-offload|"
   "--log-disable|--log-jsonl|--no-log-jsonl|-v|--verbose|--log-verbose|--offline|--log-prefix|"
   "--no-log-prefix|--log-timestamps|--no-log-timestamps|--mlock|--no-mmap|--mmap|-dio|--direct-io|"
   "-bs|--backend-sampling|--warmup|--no-warmup|--simple-io|-dkvc|--dump-kv-cache|--no-mmproj|"
   "--mmproj-auto|--no-mmproj-auto|--mmproj-offload|--no-mmproj-offload|--lora-init-without-apply",
                                 Val::none, Act::ignore, kCommon},
  // Settings of features that are off, or whose only effect is speed or memory.
  {"--keep|-np|--parallel|--chunks|-ptc|--print-token-count|--xtc-threshold|--dry-base|--dry-allowed-length|"
   "--dry-penalty-last-n|--dry-sequence-breaker|--dynatemp-exp|--mirostat-lr|--mirostat-ent|--adaptive-decay|"
   "-gaw|--grp-attn-w|--reasoning-budget-message|--reasoning-effort|--reasoning-format|"
   "--image-min-tokens|--image-max-tokens|--video-fps|--video-timestamp-interval|--video-ffmpeg-dir|"
   "--mtmd-batch-max-tokens|--hellaswag-tasks|--winogrande-tasks|--multiple-choice-tasks|"
   "--spec-draft-threads|-td|--threads-draft|--spec-draft-threads-batch|-tbd|--threads-batch-draft|"
   "--spec-draft-cpu-mask|-Cd|--cpu-mask-draft|--spec-draft-cpu-range|-Crd|--cpu-range-draft|"
   "--spec-draft-cpu-strict|--cpu-strict-draft|--spec-draft-prio|--prio-draft|--spec-draft-poll|--poll-draft|"
   "--spec-draft-cpu-mask-batch|-Cbd|--cpu-mask-batch-draft|--spec-draft-cpu-range-batch|-Crbd|--cpu-range-batch-draft|"
   "--spec-draft-cpu-strict-batch|--cpu-strict-batch-draft|--spec-draft-prio-batch|--prio-batch-draft|"
   "--spec-draft-poll-batch|--poll-batch-draft|--spec-draft-type-k|-ctkd|--cache-type-k-draft|"
   "--spec-draft-type-v|-ctvd|--cache-type-v-draft|--spec-draft-override-tensor|-otd|--override-tensor-draft|"
   "--spec-draft-n-cpu-moe|--spec-draft-ncmoe|-ncmoed|--n-cpu-moe-draft|--spec-draft-n-max|--spec-draft-n-min|"
   "--spec-synth-len|--spec-synth-rates|--spec-draft-p-split|--draft-p-split|--spec-draft-p-min|--draft-p-min|"
   "--spec-draft-device|-devd|--device-draft|--spec-draft-ngl|-ngld|--gpu-layers-draft|--n-gpu-layers-draft|"
   "--spec-ngram-mod-n-min|--spec-ngram-mod-n-max|--spec-ngram-mod-n-match|--spec-ngram-simple-size-n|"
   "--spec-ngram-simple-size-m|--spec-ngram-simple-min-hits|--spec-ngram-map-k-size-n|--spec-ngram-map-k-size-m|"
   "--spec-ngram-map-k-min-hits|--spec-ngram-map-k4v-size-n|--spec-ngram-map-k4v-size-m|--spec-ngram-map-k4v-min-hits|"
   "--draft|--draft-n|--draft-max|--draft-min|--draft-n-min|--spec-ngram-size-n|--spec-ngram-size-m|--spec-ngram-min-hits|"
   "-lcs|--lookup-cache-static|-lcd|--lookup-cache-dynamic|--kv-unified-per-slot|-cms|--checkpoint-min-step|"
   "--cache-reuse|--sse-ping-interval|--sleep-idle-seconds|-sps|--slot-prompt-similarity|--slot-save-path|"
   "--media-path|--models-max|--tags|--log-prompts-dir|--cors-methods|--cors-headers|--ui-config|--webui-config|"
   "--ui-config-file|--webui-config-file|-a|--alias|-o|--output|--output-file",
                                 Val::one,  Act::ignore, kCommon},
  {"--spec-draft-cpu-moe|-cmoed|--cpu-moe-draft|--spec-draft-backend-sampling|--no-spec-draft-backend-sampling|"
   "-kvu|--kv-unified|-no-kvu|--no-kv-unified|--cache-idle-slots|--no-cache-idle-slots|-cb|--cont-batching|"
   "-nocb|--no-cont-batching|--cache-prompt|--no-cache-prompt|--slots|--no-slots|--props|--reuse-port|"
   "--spm-infill|--cors-credentials|--no-cors-credentials|--ui|--webui|--no-ui|--no-webui|--ui-mcp-proxy|"
   "--webui-mcp-proxy|--no-ui-mcp-proxy|--no-webui-mcp-proxy|--models-autoload|--no-models-autoload|"
   "--reasoning-preserve|--no-reasoning-preserve|--no-skip-chat-parsing|--prefill-assistant|--no-prefill-assistant|"
   "--context-shift|--no-context-shift|--display-prompt|--no-display-prompt|--verbose-prompt|"
   "-sp|--special|-e|--escape|--no-escape|-st|--single-turn|-mli|--multiline-input|--show-timings|--no-show-timings|"
   "--kl-divergence|--jinja|--no-jinja|--ignore-eos",
                                 Val::none, Act::ignore, kCommon},
  {"-p|--prompt|-bf|--binary-file", Val::one, Act::refuse, kPerplexity, "synapse perplexity reads the text to score from -f FILE"},
  {"-p|--prompt|-bf|--binary-file", Val::one, Act::refuse, kImatrix, "synapse imatrix reads its text from -f FILE"},
  // Common flags synapse's other subcommands define, which llama-tokenize and
  // llama-perplexity take and do not use.
  {"-c|--ctx-size|-n|--predict|--n-predict|-b|--batch-size|-ub|--ubatch-size|-t|--threads|-s|--seed|-p|--prompt|-f|--file|"
   "-bf|--binary-file|-sys|--system-prompt|-sysf|--system-prompt-file|-r|--reverse-prompt|"
   "--temp|--temperature|--top-k|--top-p|--min-p|--typical|--typical-p|--repeat-last-n|--repeat-penalty|"
   "--presence-penalty|--frequency-penalty|-l|--logit-bias|--grammar|--grammar-file|-j|--json-schema|-jf|--json-schema-file|"
   "--chat-template|--chat-template-file|--chat-template-kwargs|--host|--port|--api-key|--api-key-file|-to|--timeout|"
   "--threads-http|--metrics|--kl-divergence-base|--save-all-logits|-m|--model",
                                 Val::one,  Act::ignore, kCommon},
  // Old spellings still in scripts: llama-bench's -mmp, llama-cli's --mlock (no value).

  // --- llama-bench (its own parser: every value is a comma list).
  {"-ngl|--n-gpu-layers|-ncmoe|--n-cpu-moe|-sm|--split-mode|-mg|--main-gpu|-nkvo|--no-kv-offload|"
   "-fa|--flash-attn|-dev|--device|-lm|--load-mode|-lzm|--lazy-mode|-ts|--tensor-split|-ot|--override-tensor|"
   "-nopo|--no-op-offload|--no-host|-mmp|--mmap|-dio|--direct-io|--numa|--prio|-C|--cpu-mask|--cpu-strict|"
   "--poll|-fitt|--fit-target|-fitc|--fit-ctx|-hft|--hf-token",
                                 Val::one,  Act::ignore, kBench},
  {"-v|--verbose|--list-devices|--offline", Val::none, Act::ignore, kBench},

  // --- llama-quantize.
  {"--keep-split",               Val::none, Act::accept, kQuantize},
  {"--max-buffer-size",          Val::one,  Act::ignore, kQuantize},
};
// clang-format on

uint32_t command_bit(const std::string& name) {
  static constexpr std::pair<std::string_view, uint32_t> kCmds[] = {
      {"run", kRun},     {"chat", kChat},         {"serve", kServe},   {"perplexity", kPerplexity},
      {"tokenize", kTokenize}, {"bench", kBench}, {"quantize", kQuantize}, {"logits", kLogits},
      {"info", kInfo},   {"synth", kSynth},           {"imatrix", kImatrix}};
  for (const auto& [n, bit] : kCmds)
    if (n == name) return bit;
  return 0;
}

bool names_contain(std::string_view names, std::string_view name) {
  while (!names.empty()) {
    const size_t bar = names.find('|');
    if (names.substr(0, bar) == name) return true;
    if (bar == std::string_view::npos) break;
    names.remove_prefix(bar + 1);
  }
  return false;
}

const Row* find_row(uint32_t cmd, std::string_view name) {
  for (const Row& r : kRows)
    if ((r.cmds & cmd) && names_contain(r.names, name)) return &r;
  return nullptr;
}

// A CLI11 option of `sub` spelled `name` ("-n", "--n-predict"), or null.
const CLI::Option* native_option(const CLI::App& sub, const std::string& name) {
  if (name.size() < 2 || name[0] != '-') return nullptr;
  if (name[1] != '-' && name.size() != 2) return nullptr;  // CLI11's short names are one letter
  for (const CLI::Option* o : sub.get_options()) {
    const auto& names = name[1] == '-' ? o->get_lnames() : o->get_snames();
    if (std::find(names.begin(), names.end(), name.substr(name[1] == '-' ? 2 : 1)) != names.end()) return o;
    if (name[1] == '-') {  // "--no-chat" of add_flag("--chat,!--no-chat")
      const auto& f = o->get_fnames();
      if (std::find(f.begin(), f.end(), name.substr(2)) != f.end()) return o;
    }
  }
  return nullptr;
}

// llama.cpp's is_truthy / is_falsey / is_autoy (common/arg.cpp).
bool is_onoff_word(const std::string& v) {
  for (const char* w : {"on", "enabled", "true", "1", "off", "disabled", "false", "0", "auto", "-1"})
    if (v == w) return true;
  return false;
}

}  // namespace

LlamaArgs normalize_llama_flags(const CLI::App& sub, const std::vector<std::string>& args) {
  LlamaArgs out;
  const uint32_t cmd = command_bit(sub.get_name());
  if (args.empty()) return out;
  out.args.push_back(args[0]);
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") {  // the rest is positional
      out.args.insert(out.args.end(), args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
      break;
    }
    if (a.size() < 2 || a[0] != '-' || (a[1] >= '0' && a[1] <= '9') || a[1] == '.') {
      out.args.push_back(a);  // a value, a positional or a negative number
      continue;
    }
    std::string name = a;
    bool attached = false;
    std::string value;
    if (const size_t eq = a.find('='); a.compare(0, 2, "--") == 0 && eq != std::string::npos) {
      name = a.substr(0, eq);
      value = a.substr(eq + 1);
      attached = true;
    }
    // llama.cpp's parse_cli_args: a long flag's '_' are read as '-'
    // (--backend_sampling is --backend-sampling); the value is left as it is.
    if (name.compare(0, 2, "--") == 0) std::replace(name.begin(), name.end(), '_', '-');
    if (const CLI::Option* o = native_option(sub, name)) {
      out.args.push_back(attached ? name + "=" + value : name);
      // Its value, whatever it looks like (-p "-ngl"), is not a flag.
      if (!attached && o->get_items_expected_min() > 0 && i + 1 < args.size()) out.args.push_back(args[++i]);
      continue;
    }
    const Row* row = find_row(cmd, name);
    if (row == nullptr) {
      out.args.push_back(a);  // CLI11 reports it
      continue;
    }
    bool has_value = attached;
    if (row->val == Val::one && !attached) {
      if (i + 1 >= args.size()) throw CLI::ValidationError(name, "needs a value");
      value = args[++i];
      has_value = true;
    } else if (row->val == Val::onoff && !attached && i + 1 < args.size() && is_onoff_word(args[i + 1])) {
      value = args[++i];
      has_value = true;
    } else if (row->val == Val::onoff && !attached && i + 1 < args.size() && args[i + 1][0] != '-') {
      throw CLI::ValidationError(name, "unknown value '" + args[i + 1] + "' (on, off or auto)");
    } else if (row->val == Val::none && attached) {
      throw CLI::ValidationError(name, "takes no value");
    }
    if (row->val == Val::onoff && attached && !is_onoff_word(value))
      throw CLI::ValidationError(name, "unknown value '" + value + "' (on, off or auto)");
    switch (row->act) {
      case Act::map:
        out.args.emplace_back(row->arg);
        if (has_value) out.args.push_back(value);
        if (name != row->arg) out.spelled.emplace_back(std::string(row->arg), name);
        break;
      case Act::accept:
        break;
      case Act::ignore:
        out.ignored.push_back(has_value ? name + " " + value : name);
        break;
      case Act::refuse:
        if (has_value && !row->noop.empty() && names_contain(row->noop, value)) break;
        throw CLI::ValidationError(name, std::string(row->arg));
    }
  }
  return out;
}

std::string ignored_flags_warning(const std::string& command, const std::vector<std::string>& ignored) {
  if (ignored.empty()) return "";
  std::string s = "synapse " + command + ": ignoring llama.cpp flags that have no effect here (CPU only, no network): ";
  for (size_t i = 0; i < ignored.size(); ++i) s += (i ? ", " : "") + ignored[i];
  return s;
}

std::string llama_flags_footer(const std::string& command) {
  const uint32_t cmd = command_bit(command);
  std::string mapped;
  for (const Row& r : kRows)
    if ((r.cmds & cmd) && r.act == Act::map) {
      std::string_view n = r.names;
      mapped += std::string(mapped.empty() ? "" : ", ") + std::string(n.substr(0, n.find('|'))) + " = " + std::string(r.arg);
    }
  std::string s = "llama.cpp's flags: ";
  if (!mapped.empty()) s += mapped + ". ";
  s += "Flags with no effect on a CPU engine without a network (-ngl, -fa, -dev, -sm, -ts, --mlock, --no-mmap, "
       "--color, --log-disable, --no-warmup, ...) are accepted with a warning; -hf, -mu and features synapse "
       "does not have (--lora, --mmproj, --rope-*, --mirostat 2, ...) are refused, naming the flag.";
  return s;
}

}  // namespace synapse::tools
