#!/usr/bin/env bash
# Installs the Debian packages synapse needs to build and test, only those
# missing. Run as root (or with sudo) on Debian 12. nginx is for
# tests/server/balancer_test.py, which runs its own unprivileged instance
# (where services start, Debian's package also starts its own on port 80).
#
# scripts/setup.sh --build (README command 1): only what building the
# `synapse` binary needs (no test libraries, Python, Node/npm or nginx).
set -euo pipefail
build_only=0
case "${1:-}" in
  --build) build_only=1 ;;
  "") ;;
  *) echo "usage: scripts/setup.sh [--build]" >&2; exit 2 ;;
esac
pkgs=(cmake g++ make ninja-build pkg-config git libpcre2-dev nlohmann-json3-dev libcli11-dev libcpp-httplib-dev)
if ((!build_only)); then
  pkgs+=(python3 libgtest-dev libgmock-dev libbenchmark-dev
         python3-dev python3-pybind11 pybind11-dev python3-numpy python3-jinja2 python3-pytest
         python3-venv python3-pip python3-setuptools python3-wheel python3-requests python3-jsonschema
         nginx)
fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}" >&2
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
((!build_only)) || exit 0
# The server tests' OpenAI and Ollama clients: Node from Debian (unless a node
# with npm is already installed), the openai package pinned by
# tests/server/node's lock file and the ollama package by tests/server/ollama-node's.
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends nodejs npm
fi
node_dir="$(dirname "$0")/../tests/server/node"
if [ ! -d "$node_dir/node_modules/openai" ]; then
  (cd "$node_dir" && npm ci --no-audit --no-fund --loglevel=error)
fi
ollama_dir="$(dirname "$0")/../tests/server/ollama-node"
if [ ! -d "$ollama_dir/node_modules/ollama" ]; then
  (cd "$ollama_dir" && npm ci --no-audit --no-fund --loglevel=error)
fi
