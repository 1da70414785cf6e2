#!/usr/bin/env bash
# Regenerates docs/PERFORMANCE.md in one run (issue 6):
#   1. builds synapse and bench_bandwidth (Release) in $BUILD;
#   2. synthesises the benchmark models into $MODELS (gitignored; a model
#      already there is reused, FORCE_SYNTH=1 rewrites them);
#   3. measures the read bandwidth with 1 and 2 threads (bench_bandwidth);
#   4. runs `synapse bench` for the rows of ../shared/docs/BASELINE.md (pp512
#      and tg128 at 1 and 2 threads) plus tg128 @ d4096 on llama-3.2-1b
#      Q4_K_M at 2 threads, and pp512 then pp2048 back to back at 2 threads
#      on the four models of issue 7 (its pp2048 target: the drop from pp512
#      no larger than llama.cpp's own, llama-bench run the same way);
#   5. writes docs/PERFORMANCE.md: synapse t/s, llama.cpp's figure, the ratio,
#      for pp the share of the int8 peak, for tg the GB/s streamed and the %
#      of the bandwidth bound; and docs/performance.svg, the same t/s as a
#      chart (scripts/perf_chart.py, matplotlib), which the README shows.
# It takes a long time (tens of minutes; more on a loaded machine). Run it on
# a quiet machine: the load average before and after is recorded in the file.
#
# Environment: LLAMA_BENCH (path to llama.cpp's llama-bench: run on the same
# files right after synapse, its figures and build printed beside ours),
# LLAMA_BENCH_NOTE (one line on where that llama-bench came from, copied into
# the file), IK_LLAMA_BENCH (path to ik_llama.cpp's llama-bench, run the same
# way with -rtr 1 and -o json (it has no jsonl), its run-time repacking of the weights into its interleaved
# layouts, right after llama.cpp: a third column), IK_LLAMA_BENCH_NOTE (as
# LLAMA_BENCH_NOTE), BUILD (default build-perf), MODELS (build/models), REPS (3),
# OUT (docs/PERFORMANCE.md), FORCE_SYNTH (0), SKIP_DEPTH (0: set 1 to skip
# the d4096 row, whose 4096-token fill is the slowest step), SKIP_LONG (0:
# set 1 to skip the pp2048 section), LONG_REPS (2: its runs per test);
# SKIP_MOE (0: set 1 to skip the sparse models of issue 44, qwen3-30b-a3b
# Q4_K_M and gpt-oss-20b MXFP4_MOE: files of 17 and 11 GiB, whose synthesis
# takes minutes and whose runs need their size in free memory), MOE_REPS (2:
# its runs per test); SKIP_IQ (0: set 1 to skip the lattice formats of
# issue 45, llama-3.1-8b with llama-quantize's IQ2_XXS, IQ3_XXS and IQ3_S
# mixes, files of 2.2-3.4 GiB), IQ_REPS (2: its runs per test), NB (16: sequences decoding together in its batched row),
# LLAMA_BATCHED_BENCH (llama.cpp's llama-batched-bench, for that row's peer);
# PP, NG, DEPTH, PP_LONG (512, 128, 4096, 2048) change the test sizes for a
# quick smoke run of the script
# (the llama.cpp column then reads n/a). REPORT_ONLY=1 only rewrites $OUT from
# the results the last run left in $BUILD/perf (no build, no measurement).
# Everything of $OUT below the line "<!-- hand-written: ... -->" (the CPU,
# the references' builds, the kernel tables, the tuning measurements) is kept
# as it is when the file is rewritten.
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD=${BUILD:-build-perf}
MODELS=${MODELS:-build/models}
REPS=${REPS:-3}
OUT=${OUT:-docs/PERFORMANCE.md}
FORCE_SYNTH=${FORCE_SYNTH:-0}
SKIP_DEPTH=${SKIP_DEPTH:-0}
PP=${PP:-512}
NG=${NG:-128}
DEPTH=${DEPTH:-4096}
SKIP_LONG=${SKIP_LONG:-0}
LONG_REPS=${LONG_REPS:-2}
PP_LONG=${PP_LONG:-2048}
SKIP_MOE=${SKIP_MOE:-0}
MOE_REPS=${MOE_REPS:-2}
SKIP_IQ=${SKIP_IQ:-0}
IQ_REPS=${IQ_REPS:-2}
NB=${NB:-16}
LLAMA_BATCHED_BENCH=${LLAMA_BATCHED_BENCH:-}
RAW="$BUILD/perf"
REPORT_ONLY=${REPORT_ONLY:-0}
LLAMA_BENCH=${LLAMA_BENCH:-}
IK_LLAMA_BENCH=${IK_LLAMA_BENCH:-}

if [ "$REPORT_ONLY" != 1 ]; then
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DSYNAPSE_BUILD_TESTS=OFF >/dev/null
cmake --build "$BUILD" -j2 --target synapse bench_bandwidth >/dev/null
SYN="$BUILD/synapse"
BW="$BUILD/bench/bench_bandwidth"
mkdir -p "$MODELS" "$RAW"
rm -f "$RAW"/*.json "$RAW"/*.jsonl

load_before="$(uptime)"
# top's first frame has no interval to measure CPU use over (it can read 0%
# or 100% idle on an idle machine): keep the second frame, one second later,
# its first 15 lines counted by awk itself (under pipefail a `| head` that
# exits first can end the script with awk's SIGPIPE).
top_before="$(top -bn2 -d 1 | awk '/^top -/ { n++ } n == 2 && k++ < 15')"
started="$(date -u '+%Y-%m-%d %H:%M UTC')"

model() {  # preset type -> path (synthesised if missing)
  local f="$MODELS/$1-$2.gguf"
  if [ "$FORCE_SYNTH" = 1 ] || [ ! -s "$f" ]; then
    "$SYN" synth --preset "$1" --type "$2" -o "$f" >&2
  fi
  echo "$f"
}

echo "perf.sh: measuring read bandwidth" >&2
"$BW" --threads 1,2 --passes 5 --json > "$RAW/bandwidth.json"
bw1=$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["results"]; print([x["gbps"] for x in r if x["threads"]==1][0])' "$RAW/bandwidth.json")
bw2=$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["results"]; print([x["gbps"] for x in r if x["threads"]==2][0])' "$RAW/bandwidth.json")
echo "perf.sh: bandwidth $bw1 GB/s (1 thread), $bw2 GB/s (2 threads)" >&2

# The bound of each synapse run: BW_PER_RUN=1 (the default) has `synapse
# bench --bw auto` measure the bandwidth at the run's thread count before
# the first tg run and after each, each run's bound taken from the mean of
# the two probes around it (this host's bandwidth moves by tens of percent
# within seconds, so a probe taken at the start of the script, or around all
# of a test's runs, can be far from the one a run met); BW_PER_RUN=0 uses
# the probe from the start of the script.
BW_PER_RUN=${BW_PER_RUN:-1}
bw_arg() { if [ "$BW_PER_RUN" = 1 ]; then echo auto; else echo "$1"; fi; }

run_bench() {  # name preset type extra-args...
  local name=$1 preset=$2 type=$3
  shift 3
  local f
  f=$(model "$preset" "$type")
  for t in 1 2; do
    local bw=$bw1
    [ "$t" = 2 ] && bw=$bw2
    echo "perf.sh: $preset $type t=$t" >&2
    "$SYN" bench -m "$f" -p "$PP" -n "$NG" -t "$t" -r "$REPS" --bw "$(bw_arg "$bw")" --json "$@" > "$RAW/$name-t$t.json"
  done
  if [ -n "$LLAMA_BENCH" ]; then
    echo "perf.sh: llama-bench $preset $type t=1,2" >&2
    "$LLAMA_BENCH" -m "$f" -t 1,2 -p "$PP" -n "$NG" -r "$REPS" -fa 0 -b 2048 -ub 512 -o jsonl 2>/dev/null \
      > "$RAW/$name-llama.jsonl"
  fi
  if [ -n "$IK_LLAMA_BENCH" ]; then
    echo "perf.sh: ik_llama.cpp llama-bench $preset $type t=1,2" >&2
    "$IK_LLAMA_BENCH" -m "$f" -t 1,2 -p "$PP" -n "$NG" -r "$REPS" -fa 0 -b 2048 -ub 512 -rtr 1 -o json 2>/dev/null \
      > "$RAW/$name-ik.jsonl"
  fi
}

run_bench llama-q4km llama-3.2-1b Q4_K_M
run_bench llama-q80 llama-3.2-1b Q8_0
run_bench llama-q40 llama-3.2-1b Q4_0
run_bench smollm2-q80 smollm2-135m Q8_0
run_bench qwen-q4km qwen2.5-0.5b Q4_K_M
if [ "$SKIP_DEPTH" != 1 ]; then
  echo "perf.sh: llama-3.2-1b Q4_K_M tg$NG @ d$DEPTH, t=2" >&2
  "$SYN" bench -m "$(model llama-3.2-1b Q4_K_M)" -p 0 -n "$NG" -d "$DEPTH" -t 2 -r "$REPS" --bw "$(bw_arg "$bw2")" --json \
    > "$RAW/llama-q4km-d4096-t2.json"
  if [ -n "$LLAMA_BENCH" ]; then
    echo "perf.sh: llama-bench tg$NG @ d$DEPTH, t=2" >&2
    "$LLAMA_BENCH" -m "$(model llama-3.2-1b Q4_K_M)" -t 2 -p 0 -n "$NG" -d "$DEPTH" -r "$REPS" -fa 0 -b 2048 -ub 512 \
      -o jsonl 2>/dev/null > "$RAW/llama-q4km-d4096-llama.jsonl"
  fi
fi

if [ "$SKIP_LONG" != 1 ]; then
  for spec in "llama-q4km llama-3.2-1b Q4_K_M" "llama-q80 llama-3.2-1b Q8_0" "llama-q40 llama-3.2-1b Q4_0" \
              "qwen-q4km qwen2.5-0.5b Q4_K_M"; do
    set -- $spec
    echo "perf.sh: $2 $3 pp$PP,$PP_LONG t=2" >&2
    "$SYN" bench -m "$(model "$2" "$3")" -p "$PP,$PP_LONG" -n 0 -t 2 -r "$LONG_REPS" --json > "$RAW/$1-long-t2.json"
    if [ -n "$LLAMA_BENCH" ]; then
      echo "perf.sh: llama-bench $2 $3 pp$PP,$PP_LONG t=2" >&2
      "$LLAMA_BENCH" -m "$(model "$2" "$3")" -t 2 -p "$PP,$PP_LONG" -n 0 -r "$LONG_REPS" -fa 0 -b 2048 -ub 512 \
        -o jsonl 2>/dev/null > "$RAW/$1-long-llama.jsonl"
    fi
    if [ -n "$IK_LLAMA_BENCH" ]; then
      echo "perf.sh: ik_llama.cpp llama-bench $2 $3 pp$PP,$PP_LONG t=2" >&2
      "$IK_LLAMA_BENCH" -m "$(model "$2" "$3")" -t 2 -p "$PP,$PP_LONG" -n 0 -r "$LONG_REPS" -fa 0 -b 2048 -ub 512 \
        -rtr 1 -o json 2>/dev/null > "$RAW/$1-long-ik.jsonl"
    fi
  done
fi

# The two references on one file at 2 threads, pp$PP and tg$NG:
# $RAW/NAME-SUFFIX-llama.jsonl and -ik.jsonl (ik_llama.cpp with -rtr 1 and
# the extra flags). Arguments: name file reps suffix [ik flags...].
peer_runs() {
  local n=$1 f=$2 reps=$3 suffix=$4
  shift 4
  if [ -n "$LLAMA_BENCH" ]; then
    echo "perf.sh: llama-bench $(basename "$f") t=2" >&2
    "$LLAMA_BENCH" -m "$f" -t 2 -p "$PP" -n "$NG" -r "$reps" -fa 0 -b 2048 -ub 512 -o jsonl 2>/dev/null \
      > "$RAW/$n-$suffix-llama.jsonl"
  fi
  if [ -n "$IK_LLAMA_BENCH" ]; then
    echo "perf.sh: ik_llama.cpp llama-bench $(basename "$f") t=2" >&2
    "$IK_LLAMA_BENCH" -m "$f" -t 2 -p "$PP" -n "$NG" -r "$reps" -fa 0 -b 2048 -ub 512 -rtr 1 "$@" -o json \
      2>/dev/null > "$RAW/$n-$suffix-ik.jsonl"
  fi
}

# The sparse models (issue 44), 2 threads: pp and tg as above (ik_llama.cpp
# with its fused MoE, -fmoe 1), the peak RSS of synapse's run (against the
# file's size: issue 44's <= 1.1x), and NB sequences decoding together
# against one (synapse bench --batch 1,NB; llama-batched-bench -npl 1,NB: its
# S_TG is the same aggregate of generated tokens per second).
if [ "$SKIP_MOE" != 1 ]; then
  for spec in "qwen3moe-q4km qwen3-30b-a3b Q4_K_M" "gptoss-mxfp4 gpt-oss-20b MXFP4_MOE"; do
    set -- $spec
    f=$(model "$2" "$3")
    echo "perf.sh: $2 $3 pp$PP tg$NG t=2" >&2
    /usr/bin/time -f %M -o "$RAW/$1-rss-kib.txt" \
      "$SYN" bench -m "$f" -p "$PP" -n "$NG" -t 2 -r "$MOE_REPS" --bw "$(bw_arg "$bw2")" --json > "$RAW/$1-moe-t2.json"
    echo "perf.sh: $2 $3 tg32 x1,$NB t=2" >&2
    "$SYN" bench -m "$f" -p 0 -n 32 --batch "1,$NB" -t 2 -r "$MOE_REPS" --json > "$RAW/$1-batch-t2.json"
    peer_runs "$1" "$f" "$MOE_REPS" moe -fmoe 1
    if [ -n "$LLAMA_BATCHED_BENCH" ]; then
      echo "perf.sh: llama-batched-bench $2 $3 tg32 x1,$NB t=2" >&2
      "$LLAMA_BATCHED_BENCH" -m "$f" -t 2 -c $((NB * 64)) -b 2048 -ub 512 -npp 0 -ntg 32 -npl "1,$NB" \
        --output-format jsonl 2>/dev/null | grep '^{' > "$RAW/$1-batch-llama.jsonl" || true
    fi
  done
fi

# The lattice formats (issue 45): llama-3.1-8b with llama-quantize's
# IQ2_XXS, IQ3_XXS and IQ3_S mixes, 2 threads, pp and tg as above.
if [ "$SKIP_IQ" != 1 ]; then
  for t in IQ2_XXS IQ3_XXS IQ3_S; do
    n="llama8b-${t,,}"
    f=$(model llama-3.1-8b "$t")
    echo "perf.sh: llama-3.1-8b $t pp$PP tg$NG t=2" >&2
    "$SYN" bench -m "$f" -p "$PP" -n "$NG" -t 2 -r "$IQ_REPS" --bw "$(bw_arg "$bw2")" --json > "$RAW/$n-iq-t2.json"
    peer_runs "$n" "$f" "$IQ_REPS" iq
  done
fi

load_after="$(uptime)"
cpu="$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
python3 - "$RAW/meta.json" "$bw1" "$bw2" "$REPS" "$started" "$cpu" "$load_before" "$load_after" "$top_before" "$LLAMA_BENCH" \
  "${LLAMA_BENCH_NOTE:-}" "$IK_LLAMA_BENCH" "${IK_LLAMA_BENCH_NOTE:-}" <<'PY'
import json, sys
keys = ["bw1", "bw2", "reps", "started", "cpu", "load_before", "load_after", "top_before", "llama_bench",
        "llama_bench_note", "ik_llama_bench", "ik_llama_bench_note"]
json.dump(dict(zip(keys, sys.argv[2:])), open(sys.argv[1], "w"), indent=1)
PY

fi

python3 - "$RAW" "$OUT" <<'EOF'
import json, os, sys
raw, out = sys.argv[1:]
meta = json.load(open(f"{raw}/meta.json"))
bw1, bw2, reps, started, cpu = meta["bw1"], meta["bw2"], meta["reps"], meta["started"], meta["cpu"]
load_before, load_after, top_before = meta["load_before"], meta["load_after"], meta["top_before"]

def load1(uptime_line):  # the 1-minute load average of an `uptime` line
    try:
        return float(uptime_line.split("load average:")[1].split(",")[0])
    except (IndexError, ValueError):
        return 0.0

# llama.cpp c392e509 on this machine kind (../shared/docs/BASELINE.md):
# llama-bench -p 512 -n 128 -r 3, best of three passes, tokens/s.
baseline = {
    ("llama-3.2-1b Q4_K_M", 1): {"pp512": 26.8, "tg128": 14.95},
    ("llama-3.2-1b Q4_K_M", 2): {"pp512": 50.2, "tg128": 25.8},
    ("llama-3.2-1b Q8_0", 1): {"pp512": 33.4, "tg128": 11.1},
    ("llama-3.2-1b Q8_0", 2): {"pp512": 66.1, "tg128": 19.4},
    ("llama-3.2-1b Q4_0", 1): {"pp512": 40.0, "tg128": 16.3},
    ("llama-3.2-1b Q4_0", 2): {"pp512": 75.7, "tg128": 28.3},
    ("smollm2-135m Q8_0", 1): {"pp512": 220.6, "tg128": 82.2},
    ("smollm2-135m Q8_0", 2): {"pp512": 411.4, "tg128": 137.9},
    ("qwen2.5-0.5b Q4_K_M", 1): {"pp512": 60.1, "tg128": 27.2},
    ("qwen2.5-0.5b Q4_K_M", 2): {"pp512": 113.0, "tg128": 43.3},
}
order = ["llama-q4km", "llama-q80", "llama-q40", "smollm2-q80", "qwen-q4km"]

def llama_results(f):  # the result objects of a llama-bench -o jsonl (or -o json) file ([] when it is missing)
    if not os.path.exists(f):
        return []
    text = open(f).read()
    if text.lstrip().startswith("["):  # -o json: one array (ik_llama.cpp's llama-bench has no jsonl)
        return json.loads(text)
    # llama-batched-bench prints C's "-nan" for the speed of an empty prompt: JSON's NaN to Python.
    text = text.replace(": -nan", ": NaN").replace(": nan", ": NaN")
    return [json.loads(line) for line in text.splitlines() if line.strip().startswith("{")]

# llama-bench on this machine in this run (LLAMA_BENCH; ik_llama.cpp's:
# IK_LLAMA_BENCH), keyed like synapse's rows: (file name, threads, test).
def bench_rows(suffix):
    got, build = {}, None
    for n in order + ["llama-q4km-d4096"]:
        for j in llama_results(f"{raw}/{n}-{suffix}.jsonl"):
            test = f"pp{j['n_prompt']}" if j["n_prompt"] else f"tg{j['n_gen']}"
            if j.get("n_depth"):
                test += f" @ d{j['n_depth']}"
            got[(os.path.basename(j["model_filename"]), j["n_threads"], test)] = j
            build = j.get("build_commit")
    return got, build
here, here_build = bench_rows("llama")
ik, ik_build = bench_rows("ik")
files = [f"{raw}/{n}-t{t}.json" for n in order for t in (1, 2)] + [f"{raw}/llama-q4km-d4096-t2.json"]
rows, commit = [], "unknown"
for f in files:
    if not os.path.exists(f):
        continue
    j = json.load(open(f))
    commit = j["commit"]
    rows += [dict(r, file=os.path.basename(r.get("model_path", ""))) for r in j["results"]]

def mib(b): return f"{b / 1048576:.2f} MiB"

lines = []
w = lines.append
w("# Performance")
w("")
w("Generated by `scripts/perf.sh` (do not edit by hand; re-run the script).")
w("Models are `synapse synth` files: random weights at the real models' shapes and")
w("llama-quantize's per-tensor types, so their tensor bytes equal those of the real")
w("quantized files (speed does not depend on the values). Two llama.cpp columns: \"here\" (when the")
w("script was given LLAMA_BENCH, llama-bench run on this machine in this run: the ratio to trust),")
w("and BASELINE (`../shared/docs/BASELINE.md`: build c392e509 on an AMD Zen 3 of the project's")
w("machine kind, best of three passes; another machine, so only indicative).")
w("")
if here:
    any_row = next(iter(here.values()))
    w(f"The llama-bench of this run: `{meta.get('llama_bench', '')}`, llama.cpp build {any_row.get('build_commit')}"
      f" ({any_row.get('build_number')}), backends {any_row.get('backends')}, CPU as it reports it:"
      f" {any_row.get('cpu_info')}. It is not part of the project.")
    if meta.get("llama_bench_note"):
        w(f"How it was obtained (LLAMA_BENCH_NOTE): {meta['llama_bench_note']}")
    w("")
if ik:
    w(f"ik_llama.cpp's llama-bench of this run: `{meta.get('ik_llama_bench', '')}` (build {ik_build}), run with"
      " `-rtr 1` (its weights repacked at load). Its column and ratio: \"ik_llama.cpp\".")
    if meta.get("ik_llama_bench_note"):
        w(f"How it was obtained (IK_LLAMA_BENCH_NOTE): {meta['ik_llama_bench_note']}")
    w("")
w(f"- run: {started}, synapse commit `{commit}`, {reps} runs per test (mean ± sd)")
w(f"- CPU: {cpu}, {os.cpu_count()} logical CPUs")
w(f"- read bandwidth (`bench_bandwidth`, 1 GiB, best of 5): {float(bw1):.2f} GB/s at 1 thread, {float(bw2):.2f} GB/s at 2 threads")
w(f"- load before: `{load_before.strip()}`")
w(f"- load after: `{load_after.strip()}`")
w("")
def idle_pct(top_text):  # the idle % of top's "%Cpu(s):" line, or None
    for line in top_text.splitlines():
        if line.startswith("%Cpu"):
            try:
                return float(line.split(" id")[0].split(",")[-1].strip())
            except ValueError:
                return None
    return None

# Quiet = the CPUs were idle when the run started (top's snapshot). The load
# averages lag by minutes, and the one taken after includes the benchmarks'
# own threads, so they are recorded but not used to judge.
idle = idle_pct(top_before)
if idle is None or idle < 80.0:
    w(f"**The machine was not quiet at the start of this run** (CPU idle {idle}% in top: other")
    w("processes were compiling or fuzzing). Speeds and the measured bandwidth are depressed and")
    w("noisy, and thread scaling is distorted; re-run on a quiet machine before drawing conclusions.")
    w("")
else:
    w(f"The CPUs were {idle:.0f}% idle when the run started (top below); the load averages lag and the")
    w("one taken after includes the benchmarks' own threads.")
    w("")
w("Decode bound = read bandwidth / bytes read per token (weights + KV rows attention")
w("reads); GB/s = those bytes x t/s. A ratio above 1 means synapse is faster. \"bw GB/s\" is the")
w("bandwidth each bound was computed from: measured by `synapse bench --bw auto` at the run's thread")
w("count before the first tg run and after each (the probes in brackets; BW_PER_RUN=1, the default),")
w("the mean over the runs of the mean of each run's two probes; \"% of bound\" is then the mean over")
w("the runs of t/s / that run's bound. Else the probe at the start of the script.")
w("")
if here:
    w(f"\"llama.cpp here\" is llama-bench (`{meta.get('llama_bench', '')}`, build {here_build}) run by this script")
    w("on the same files, threads and sizes right after synapse's runs of each model (-fa 0,")
    w("-b 2048 -ub 512); \"ratio here\" = synapse / llama.cpp here, the ratio from one run on one machine.")
    w("\"BASELINE\" is the figure of ../shared/docs/BASELINE.md (another machine: AMD Zen 3).")
    w("")
w("\"int8 %\" (pp tests) is the share of the machine's int8 peak synapse reached: int8 GOP per token (2 x the")
w("elements of the quantized matrices a token goes through, the output matrix once per pass) x t/s / the")
w("peak of that thread count, which `synapse bench` measures with ../shared/tools/vnni_peak.c's method")
w("(bench/int8_peak.hpp; tools/cmd_bench.cpp's header says what is counted).")
w("")
w("![synapse, llama.cpp and ik_llama.cpp tokens/s per model and test](performance.svg)")
w("")
w("| model | size | test | threads | synapse t/s | llama.cpp here t/s | ratio here | ik_llama.cpp t/s | ratio vs ik | BASELINE t/s | ratio vs BASELINE | int8 % | GB/s | bw GB/s | bound t/s | % of bound |")
w("| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
chart = []
for r in rows:
    test = r["test"]
    base = baseline.get((r["model"], r["threads"]), {}).get(test)
    ratio = f"{r['avg_ts'] / base:.2f}" if base else "-"
    h = here.get((r["file"], r["threads"], test))
    h_ts = f"{h['avg_ts']:.2f} ± {h['stddev_ts']:.2f}" if h else "n/a"
    h_ratio = f"**{r['avg_ts'] / h['avg_ts']:.2f}**" if h and h["avg_ts"] > 0 else "-"
    k = ik.get((r["file"], r["threads"], test))
    k_ts = f"{k['avg_ts']:.2f} ± {k['stddev_ts']:.2f}" if k else "n/a"
    k_ratio = f"**{r['avg_ts'] / k['avg_ts']:.2f}**" if k and k["avg_ts"] > 0 else "-"
    gbps = f"{r['gbps']:.2f}" if "gbps" in r else "-"
    bound = f"{r['bound_ts']:.2f}" if "bound_ts" in r else "-"
    bw = f"{r['bw_gbps']:.1f}" if "bw_gbps" in r and "bound_ts" in r else "-"
    if bw != "-" and "bw_probes_gbps" in r:
        bw += " (" + ", ".join(f"{p:.0f}" for p in r["bw_probes_gbps"]) + ")"
    pct = f"{100 * r['fraction_of_bound']:.0f}%" if "fraction_of_bound" in r else "-"
    int8 = f"{100 * r['fraction_of_int8_peak']:.1f}%" if "fraction_of_int8_peak" in r else "-"
    w(f"| {r['model']} | {mib(r['size_bytes'])} | {test} | {r['threads']} | {r['avg_ts']:.2f} ± {r['stddev_ts']:.2f} | "
      f"{h_ts} | {h_ratio} | {k_ts} | {k_ratio} | {base if base else 'n/a'} | {ratio} | {int8} | {gbps} | {bw} | {bound} | {pct} |")
    chart.append({"model": r["model"], "test": test, "threads": r["threads"], "synapse": r["avg_ts"],
                  "llama": h["avg_ts"] if h else None, "ik": k["avg_ts"] if k else None})
w("")
w("llama.cpp has no tg128 @ d4096 figure in BASELINE.md (n/a).")
w("")

# pp512 then pp2048 in one invocation of each engine, 2 threads (issue 7:
# synapse's drop no larger than llama.cpp's).
def load_long(n):
    syn, lla, ikl = {}, {}, {}
    f = f"{raw}/{n}-long-t2.json"
    if os.path.exists(f):
        for r in json.load(open(f))["results"]:
            syn[r["n_prompt"]] = r
    for j in llama_results(f"{raw}/{n}-long-llama.jsonl"):
        lla[j["n_prompt"]] = j
    for j in llama_results(f"{raw}/{n}-long-ik.jsonl"):
        ikl[j["n_prompt"]] = j
    return syn, lla, ikl
long_rows = [(n, *load_long(n)) for n in ["llama-q4km", "llama-q80", "llama-q40", "qwen-q4km"]]
long_rows = [x for x in long_rows if len(x[1]) == 2]
if long_rows:
    w("## Long prompts: pp2048 against pp512 (2 threads)")
    w("")
    w("Each engine ran pp512 and then pp2048 in one invocation (`synapse bench -p 512,2048 -n 0 -t 2`,")
    w("`llama-bench -p 512,2048 -n 0 -t 2 -fa 0 -b 2048 -ub 512`), runs per test as given below.")
    w("Drop = pp2048 / pp512 - 1; issue 7's target: synapse's drop no larger than llama.cpp's.")
    w("")
    w("| model | synapse pp512 | synapse pp2048 | synapse drop | llama.cpp pp512 | llama.cpp pp2048 | llama.cpp drop | met | ik_llama.cpp pp512 | ik_llama.cpp pp2048 | ratio vs ik pp512 | ratio vs ik pp2048 |")
    w("| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: |")
    for n, syn, lla, ikl in long_rows:
        ps = sorted(syn)
        a, b = syn[ps[0]], syn[ps[1]]
        sd = b["avg_ts"] / a["avg_ts"] - 1
        cells = [a["model"], f"{a['avg_ts']:.1f} ± {a['stddev_ts']:.1f}", f"{b['avg_ts']:.1f} ± {b['stddev_ts']:.1f}", f"{100 * sd:+.1f}%"]
        if len(lla) == 2:
            la, lb = lla[ps[0]], lla[ps[1]]
            ld = lb["avg_ts"] / la["avg_ts"] - 1
            cells += [f"{la['avg_ts']:.1f} ± {la['stddev_ts']:.1f}", f"{lb['avg_ts']:.1f} ± {lb['stddev_ts']:.1f}",
                      f"{100 * ld:+.1f}%", "yes" if sd >= ld else "**no**"]
        else:
            cells += ["n/a", "n/a", "n/a", "-"]
        if len(ikl) == 2:
            ka, kb = ikl[ps[0]], ikl[ps[1]]
            cells += [f"{ka['avg_ts']:.1f} ± {ka['stddev_ts']:.1f}", f"{kb['avg_ts']:.1f} ± {kb['stddev_ts']:.1f}",
                      f"**{a['avg_ts'] / ka['avg_ts']:.2f}**", f"**{b['avg_ts'] / kb['avg_ts']:.2f}**"]
        else:
            cells += ["n/a", "n/a", "-", "-"]
        w("| " + " | ".join(cells) + " |")
    w("")
    first_syn = long_rows[0][1]
    w(f"Runs per test in this section: {len(first_syn[min(first_syn)]['samples_ts'])}.")
    w("")
# pp/tg rows of models run by the three engines at 2 threads
# ($raw/NAME-SUFFIX-t2.json, -llama.jsonl, -ik.jsonl): t/s, the ratios, the
# share of the bound.
def three_engine_table(models, suffix):
    w("| model | test | synapse t/s | llama.cpp t/s | ratio | ik_llama.cpp t/s | ratio vs ik | GB/s | bound t/s | % of bound |")
    w("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for n, label in models:
        lla = {(f"pp{j['n_prompt']}" if j["n_prompt"] else f"tg{j['n_gen']}"): j for j in llama_results(f"{raw}/{n}-{suffix}-llama.jsonl")}
        ikl = {(f"pp{j['n_prompt']}" if j["n_prompt"] else f"tg{j['n_gen']}"): j for j in llama_results(f"{raw}/{n}-{suffix}-ik.jsonl")}
        for r in json.load(open(f"{raw}/{n}-{suffix}-t2.json"))["results"]:
            t = r["test"]
            cells = [label, t, f"{r['avg_ts']:.2f} ± {r['stddev_ts']:.2f}"]
            for peer in (lla.get(t), ikl.get(t)):
                cells += ([f"{peer['avg_ts']:.2f} ± {peer['stddev_ts']:.2f}", f"**{r['avg_ts'] / peer['avg_ts']:.2f}**"]
                          if peer and peer["avg_ts"] > 0 else ["n/a", "-"])
            cells += [f"{r['gbps']:.2f}" if "gbps" in r else "-", f"{r['bound_ts']:.2f}" if "bound_ts" in r else "-",
                      f"{100 * r['fraction_of_bound']:.0f}%" if "fraction_of_bound" in r else "-"]
            w("| " + " | ".join(cells) + " |")
    w("")

# The lattice formats of issue 45 (2 threads).
iq = [(f"llama8b-{t.lower()}", f"llama-3.1-8b {t}") for t in ("IQ2_XXS", "IQ3_XXS", "IQ3_S")]
iq = [m for m in iq if os.path.exists(f"{raw}/{m[0]}-iq-t2.json")]
if iq:
    w("## Lattice formats at llama-3.1-8b shapes: IQ2_XXS, IQ3_XXS, IQ3_S mixes (issue 45; 2 threads)")
    w("")
    w("`synapse synth --preset llama-3.1-8b --type T` (llama-quantize's per-tensor mix for the file type, random")
    w("blocks), `synapse bench -p 512 -n 128 -t 2`, llama-bench the same with `-fa 0 -b 2048 -ub 512`,")
    w("ik_llama.cpp's with `-rtr 1`, each model's engines back to back. Issue 45's targets: pp512 >= 2x llama.cpp")
    w("and >= 1.1x ik_llama.cpp; tg128 >= 1.0x both and >= 90% of the bound.")
    w("")
    three_engine_table(iq, "iq")

# The sparse models of issue 44 (2 threads).
moe = [("qwen3moe-q4km", "qwen3-30b-a3b Q4_K_M"), ("gptoss-mxfp4", "gpt-oss-20b MXFP4_MOE")]
moe = [m for m in moe if os.path.exists(f"{raw}/{m[0]}-moe-t2.json")]
if moe:
    w("## Sparse models: qwen3-30b-a3b and gpt-oss-20b (issue 44; 2 threads)")
    w("")
    w("`synapse bench -p 512 -n 128 -t 2`, llama-bench the same with `-fa 0 -b 2048 -ub 512`, ik_llama.cpp's")
    w("with `-rtr 1 -fmoe 1`, each model's engines back to back. The bound counts the bytes a token reads:")
    w("attention, router and shared tensors, and expert_used_count of expert_count experts. Issue 44's targets:")
    w("tg128 >= 1.0x the faster peer and >= 90% of the bound; pp512 >= 2x llama.cpp and >= 1.1x ik_llama.cpp.")
    w("")
    three_engine_table(moe, "moe")
    w("Sequences decoding together (`synapse bench -p 0 -n 32 --batch 1,NB -t 2`; llama.cpp's")
    w("`llama-batched-bench -npp 0 -ntg 32 -npl 1,NB -t 2`, its S_TG): aggregate generated tokens per second,")
    w("and synapse's peak RSS in its pp/tg run (`/usr/bin/time -f %M`) against the file's size (target <= 1.1x).")
    w("")
    w("| model | synapse x1 t/s | synapse xNB t/s | NB | scale | llama.cpp x1 | llama.cpp xNB | ratio xNB | peak RSS | file | RSS / file |")
    w("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for n, label in moe:
        f = f"{raw}/{n}-batch-t2.json"
        if not os.path.exists(f):
            continue
        res = json.load(open(f))["results"]
        by = {r.get("batch", 1): r for r in res}
        nb = max(by)
        one, many = by.get(1), by[nb]
        lb = {j["pl"]: j for j in llama_results(f"{raw}/{n}-batch-llama.jsonl")}
        rss = open(f"{raw}/{n}-rss-kib.txt").read().split()[-1] if os.path.exists(f"{raw}/{n}-rss-kib.txt") else ""
        size = res[0]["size_bytes"] if res and "size_bytes" in res[0] else 0
        rss_b = int(rss) * 1024 if rss.isdigit() else 0
        cells = [label, f"{one['avg_ts']:.2f}" if one else "-", f"{many['avg_ts']:.2f}", str(nb),
                 f"{many['avg_ts'] / one['avg_ts']:.2f}x" if one else "-",
                 f"{lb[1]['speed_tg']:.2f}" if 1 in lb else "n/a", f"{lb[nb]['speed_tg']:.2f}" if nb in lb else "n/a",
                 f"**{many['avg_ts'] / lb[nb]['speed_tg']:.2f}**" if nb in lb and lb[nb]["speed_tg"] > 0 else "-",
                 mib(rss_b) if rss_b else "-", mib(size) if size else "-",
                 f"{rss_b / size:.2f}" if rss_b and size else "-"]
        w("| " + " | ".join(cells) + " |")
    w("")
w("## How to reproduce")
w("")
w("```sh")
w("scripts/perf.sh                      # everything above (REPS=3; SKIP_DEPTH=1 skips d4096)")
w("LLAMA_BENCH=/path/to/llama-bench scripts/perf.sh   # plus llama.cpp on the same machine in the same run")
w("LLAMA_BENCH=/work/ref/llama-build/bin/llama-bench IK_LLAMA_BENCH=/work/ref/ik-build/bin/llama-bench scripts/perf.sh")
w("build-perf/synapse synth --preset llama-3.2-1b --type Q4_K_M -o build/models/llama-3.2-1b-Q4_K_M.gguf")
w("build-perf/bench/bench_bandwidth --threads 1,2")
w("build-perf/synapse bench -m build/models/llama-3.2-1b-Q4_K_M.gguf -p 512 -n 128 -t 2 -r 3 --bw auto")
w("build-perf/synapse bench -m build/models/llama-3.2-1b-Q4_K_M.gguf -p 0 -n 128 -d 4096 -t 2 -r 3 --bw auto")
w("build-perf/synapse bench -m build/models/llama-3.2-1b-Q4_K_M.gguf -p 512,2048 -n 0 -t 2 -r 2")
w("build-perf/synapse bench -m build/models/qwen3-30b-a3b-Q4_K_M.gguf -p 0 -n 32 --batch 1,16 -t 2 -r 2")
w("build-perf/synapse synth --preset llama-3.1-8b --type IQ3_S -o build/models/llama-3.1-8b-IQ3_S.gguf")
w("build-perf/synapse bench -m build/models/llama-3.1-8b-IQ3_S.gguf -p 512 -n 128 -t 2 -r 2 --bw auto")
w("```")
w("")
w("## Machine state at the start (`top -bn2 -d 1`, second frame, first 15 lines)")
w("")
w("```")
w(top_before)
w("```")
# The hand-written sections (the machine and the references, the kernel
# tables, the tuning measurements the code's comments point to) survive
# regeneration: everything below the marker line. A file from before the
# marker keeps what follows its first hand-written heading, under a marker.
marker = "<!-- hand-written: scripts/perf.sh keeps everything below this line -->"
old = open(out).read() if os.path.exists(out) else ""
if marker in old:
    lines += ["", marker + old.split(marker, 1)[1].rstrip("\n")]
else:
    for keep in ("## AVX-512 VNNI prefill", "## Measurements behind the tuning constants"):
        if keep in old:
            lines += ["", marker, "", keep + old.split(keep, 1)[1].rstrip("\n")]
            break
open(out, "w").write("\n".join(lines) + "\n")
json.dump({"rows": chart, "title": f"{cpu}, synapse {commit}, {started}: tokens/s (higher is better)"},
          open(f"{raw}/chart.json", "w"), indent=1)
print(f"perf.sh: wrote {out}", file=sys.stderr)
EOF

# The chart the README and the table show: docs/performance.svg beside $OUT
# (matplotlib: Debian's python3-matplotlib, for the system Python when the
# first python3 on PATH lacks it; installed here when missing).
chart_py=python3
python3 -c 'import matplotlib' 2>/dev/null || chart_py=/usr/bin/python3
if ! "$chart_py" -c 'import matplotlib' 2>/dev/null; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get install -y -qq --no-install-recommends python3-matplotlib >/dev/null
fi
"$chart_py" scripts/perf_chart.py "$RAW/chart.json" "$(dirname "$OUT")/performance.svg"
echo "perf.sh: wrote $(dirname "$OUT")/performance.svg" >&2
