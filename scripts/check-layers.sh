#!/usr/bin/env bash
# Fails when an #include in src/, tests/<layer>/ or include/synapse/ points up
# or sideways in the layer table of docs/LAYERS.md (a layer may include its
# own headers and those of the layers below it, nothing else; a layer's tests
# are held to their layer), or when an installed header (include/synapse/)
# names a type of a layer's internal namespace (synapse::model::,
# synapse::runtime::, ...): public types live in synapse:: and synapse::gguf::
# only; or when a tool (tools/) includes an internal header of a layer below
# the server (tools sit above it). Run by scripts/test.sh.
set -euo pipefail
cd "$(dirname "$0")/.."

# layer -> the layers it may include (itself and everything below it).
declare -A allowed=(
  [base]="base"
  [gguf]="gguf base"
  [quant]="quant gguf base"
  [tokenizer]="tokenizer gguf base"
  [kernels]="kernels quant gguf base"
  [model]="model kernels quant tokenizer gguf base"
  [grammar]="grammar base"
  [template]="template base"
  [runtime]="runtime template grammar model kernels quant tokenizer gguf base"
  [server]="server runtime template grammar model kernels quant tokenizer gguf base"
)
# The public headers, by the layer that implements them.
declare -A public=(
  [error]=base [types]=base [version]=base [gguf]=gguf [quantize]=runtime [tokenizer]=tokenizer
  [sampling]=runtime [stop]=runtime [chat]=runtime [synapse]=runtime [generation]=runtime [scheduler]=runtime
  [synth]=runtime [imatrix]=runtime [reply_format]=runtime [grammar]=grammar
)

# The layer of an included path ("quant/gemm.hpp", "synapse/chat.hpp"), or
# empty for a header outside the table (system and third-party headers).
layer_of_include() {
  local dir=${1%%/*} name
  if [[ $dir == synapse ]]; then
    name=${1#synapse/}; name=${name%.hpp}
    echo "${public[$name]:-unknown-public:$name}"
  elif [[ -n ${allowed[$dir]:-} ]]; then
    echo "$dir"
  fi
}

bad=0
check_file() {  # file, its layer
  local file=$1 layer=$2 inc target
  while IFS= read -r inc; do
    target=$(layer_of_include "$inc")
    [[ -z $target ]] && continue
    if [[ $target == unknown-public:* ]]; then
      echo "$file: includes \"$inc\", a public header missing from scripts/check-layers.sh's table"
      bad=1
    elif [[ " ${allowed[$layer]} " != *" $target "* ]]; then
      echo "$file: layer '$layer' includes \"$inc\" of layer '$target' (up or sideways; docs/LAYERS.md)"
      bad=1
    fi
  done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$file")
}

for dir in src/*/; do
  layer=$(basename "$dir")
  if [[ -z ${allowed[$layer]:-} ]]; then
    echo "$dir: a folder missing from the layer table (scripts/check-layers.sh, docs/LAYERS.md)"
    bad=1
    continue
  fi
  while IFS= read -r f; do check_file "$f" "$layer"; done < <(find "$dir" -name '*.hpp' -o -name '*.cpp' -o -name '*.h')
done
# tests/<layer>/ is held to its layer; tests/tools and the shared helpers in
# tests/ sit above every layer.
for dir in tests/*/; do
  layer=$(basename "$dir")
  [[ -n ${allowed[$layer]:-} ]] || continue
  while IFS= read -r f; do check_file "$f" "$layer"; done < <(find "$dir" -name '*.hpp' -o -name '*.cpp' -o -name '*.h')
done
# tools/ is a client of the public API and sits above the server layer: it
# may include the installed headers (synapse/*.hpp), its own headers, the
# bench helpers ../bench/bandwidth.hpp and ../bench/int8_peak.hpp, base/strings.hpp (header-only join
# helpers in synapse::) and the server layer's headers (server/*.hpp, which
# must exist), nothing else (docs/LAYERS.md).
for f in tools/*.cpp tools/*.hpp; do
  [[ -e $f ]] || continue
  while IFS= read -r inc; do
    case $inc in
      synapse/*) [[ -e include/$inc || -e include/$inc.in ]] && continue ;;
      */*) ;;
      *) [[ -e tools/$inc ]] && continue ;;
    esac
    [[ $inc == ../bench/bandwidth.hpp || $inc == ../bench/int8_peak.hpp || $inc == base/strings.hpp ]] && continue
    [[ $inc == server/*.hpp && -e src/$inc ]] && continue
    echo "$f: includes \"$inc\"; tools use only the public API (include/synapse/) and the server layer (server/; docs/LAYERS.md)"
    bad=1
  done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f")
done
# Internal namespaces: every layer's but gguf's (synapse::gguf is public:
# gguf.hpp), plus the tools' and tests'. The template layer's is synapse::jinja
# (`template` is a C++ keyword).
internal="base|quant|tokenizer|kernels|model|grammar|jinja|runtime|server|tools|test"
for f in include/synapse/*.hpp include/synapse/*.hpp.in; do
  [[ -e $f ]] || continue
  # Code only: comments may name internal functions as provenance.
  if hits=$(sed 's|//.*||' "$f" | grep -nE "(\b($internal)::|namespace[[:space:]]+(synapse::)?($internal)\b)"); then
    echo "$f: an installed header names an internal namespace (public types belong in synapse::):"
    echo "$hits"
    bad=1
  fi
done
for f in include/synapse/*.hpp include/synapse/*.hpp.in; do
  [[ -e $f ]] || continue
  name=$(basename "$f"); name=${name%%.*}
  layer=${public[$name]:-}
  if [[ -z $layer ]]; then
    echo "$f: a public header missing from scripts/check-layers.sh's table"
    bad=1
    continue
  fi
  check_file "$f" "$layer"
done
if (( bad )); then
  echo "check-layers: FAILED" >&2
  exit 1
fi
echo "check-layers: every include points down"
