#!/usr/bin/env bash
# Model-based tests of the real vLLM and SGLang page bookkeeping, on the CPU.
#
# Builds one virtual environment per engine (their pins conflict), each with
# the CPU build of torch, the engine wheel installed without its dependencies
# plus only the pure-Python packages its bookkeeping modules import, this
# project (editable) and pytest; then runs tests/real_engines/ for that
# engine inside its environment.  See docs/real-engines.md.
#
# Usage:  scripts/real-engines.sh [--install-only] [vllm] [sglang] [sglang-releases]
#         (no engine named: all three)
#
# sglang-releases is one environment holding the SGLang dependencies once and
# the release wheels side by side, each installed --no-deps into its own
# directory (releases/<version>/ in the environment, with the transformers a
# release needs where the shared one does not load it); its tests run each
# release in a subprocess with that directory first on sys.path.
#
# Environment:
#   OWNERSHIP_REAL_ENGINES_VENVS   where the environments live (default: .venvs/ in the repository)
#   OWNERSHIP_REAL_ENGINES_PYTHON  the interpreter that creates them (default: python3, 3.11+)
#
# An environment is rebuilt only when this script or its engine's constraints
# file changed since it was built.  Fails if any test fails, errors, or is
# skipped (a skip here means the engine did not import), or if no test ran.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
self="$root/scripts/real-engines.sh"
cd "$root"

venvs="${OWNERSHIP_REAL_ENGINES_VENVS:-$root/.venvs}"
python="${OWNERSHIP_REAL_ENGINES_PYTHON:-python3}"
constraints_dir="$root/examples/real_engines"

# Pinned versions.  The engines are installed with --no-deps because their
# declared dependencies pull CUDA builds and serving stacks that the page
# bookkeeping never imports; the lists below are what its imports demand.
torch_pin="torch==2.13.0"
vllm_pin="vllm==0.33.0"
vllm_deps=(packaging psutil numpy pyzmq urllib3 regex msgspec pydantic cbor2
  'transformers>=5.16.1,<5.21.0' aiohttp requests oss-harmony openai pillow pybase64
  cachetools cloudpickle uvloop py-cpuinfo prometheus_client apache-tvm-ffi==0.1.11
  'fastapi>=0.133.0,<0.137.0' partial-json-parser 'llguidance>=1.7.0,<1.8.0')
vllm_nodeps=(xgrammar==0.2.8)
sglang_pin="sglang==0.5.23"
sglang_deps=(numpy orjson psutil pybase64 requests packaging pillow starlette msgspec
  pydantic pyzmq tqdm IPython aiohttp transformers==5.19.0 dill apache-tvm-ffi==0.1.11
  sentencepiece compressed-tensors==0.18.0 gguf)
# triton is imported unconditionally by the allocator module; torchvision by
# the radix cache's imports (its compiled part does not load with CPU torch:
# the tests define the missing operator schema before importing SGLang).
sglang_nodeps=(triton==3.9.0 torchvision==0.28.0)
# The releases whose disaggregation queues tests/real_engines/test_sglang_disagg_releases.py
# replays the committed counterexample against (0.5.20: the last one with the pending-rejection
# leak, 0.5.21: the first one with is_unadmitted_reject), and those whose startup logs
# tests/real_engines/test_sglang_preflight_fixtures.py makes again (all of them: 0.5.4, the
# first with disaggregation; 0.5.11, the incident's; 0.5.19; 0.5.21; 0.5.23, the newest).
sglang_releases=(0.5.4 0.5.11 0.5.19 0.5.20 0.5.21 0.5.23)
# What a release's ServerArgs needs beside it where the shared transformers (0.5.23's pin)
# does not load its model configs: its own transformers and what that one checks at import.
declare -A sglang_release_extras=(
  [0.5.4]="transformers==4.57.1 tokenizers==0.22.2 huggingface_hub==0.36.2"
  [0.5.11]="transformers==5.6.0 tokenizers==0.22.2 huggingface_hub==1.33.0"
  [0.5.19]="transformers==5.12.1 tokenizers==0.22.2 huggingface_hub==1.33.0"
)
# What importing their scheduler and disaggregation modules adds to the allocator's list
# (server_args reaches the OpenAI protocol and function-call parsers, the scheduler uvicorn).
sglang_releases_deps=(openai==3.57.0 partial-json-parser==0.2.1.1.post7 xgrammar==0.2.9
  einops==0.8.2 setproctitle==1.3.8 uvicorn==0.54.0 fastapi==0.165.0 httpx==0.29.0)

install_only=0
engines=()
for arg in "$@"; do
  case "$arg" in
    --install-only) install_only=1 ;;
    vllm | sglang | sglang-releases) engines+=("$arg") ;;
    -h | --help) sed -n '2,25p' "$self" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "real-engines.sh: unknown argument '$arg' (expected --install-only, vllm, sglang, sglang-releases)" >&2; exit 2 ;;
  esac
done
[ ${#engines[@]} -eq 0 ] && engines=(vllm sglang sglang-releases)

# The stamp is a digest of everything that decides an environment's contents.
stamp_of() {
  local cons="$constraints_dir/constraints-${1%-releases}.txt"
  { cat "$self"; if [ -f "$cons" ]; then cat "$cons"; fi; } | sha256sum | cut -d' ' -f1
}

build_venv() {
  local engine="$1" venv="$venvs/$1"
  local stamp
  stamp="$(stamp_of "$engine")"
  if [ -f "$venv/.ownership-stamp" ] && [ "$(cat "$venv/.ownership-stamp")" = "$stamp" ]; then
    echo "== $engine: environment $venv is up to date"
    return
  fi
  echo "== $engine: building environment $venv"
  rm -rf "$venv"
  mkdir -p "$venvs"
  "$python" -m venv "$venv"
  local pip=("$venv/bin/python" -m pip install --quiet --disable-pip-version-check)
  # sglang-releases shares sglang's constraints (minus the sglang pin itself: the
  # release wheels go into directories of their own, below).
  local cons="$constraints_dir/constraints-${engine%-releases}.txt"
  if [ -f "$cons" ]; then
    grep -v '^sglang==' "$cons" >"$venv/.constraints.txt"
    pip+=(-c "$venv/.constraints.txt")
  fi
  # torch first and pinned: an unpinned torch (or torchvision) resolves to a
  # multi-GB CUDA build.
  "${pip[@]}" "$torch_pin"
  case "$engine" in
    vllm)
      "${pip[@]}" --no-deps "$vllm_pin"
      "${pip[@]}" "$torch_pin" "${vllm_deps[@]}"
      "${pip[@]}" --no-deps "${vllm_nodeps[@]}"
      ;;
    sglang)
      "${pip[@]}" --no-deps "$sglang_pin"
      "${pip[@]}" "$torch_pin" "${sglang_deps[@]}"
      "${pip[@]}" --no-deps "${sglang_nodeps[@]}"
      ;;
    sglang-releases)
      "${pip[@]}" "$torch_pin" "${sglang_deps[@]}" "${sglang_releases_deps[@]}"
      "${pip[@]}" --no-deps "${sglang_nodeps[@]}"
      local version
      for version in "${sglang_releases[@]}"; do
        # exact pins and --no-deps: without the shared constraints, which pin 0.5.23's transformers
        # shellcheck disable=SC2086 # the extras are a word list
        "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps \
          --target "$venv/releases/$version" "sglang==$version" ${sglang_release_extras[$version]:-}
      done
      ;;
  esac
  "${pip[@]}" "$torch_pin" -e "$root" pytest
  echo "$stamp" >"$venv/.ownership-stamp"
}

# Runs the engine's tests and fails unless at least one test ran and none
# failed, errored or was skipped.
run_tests() {
  local engine="$1" venv="$venvs/$1"
  local report validate_report=""
  report="$(mktemp)"
  local tests=()
  case "$engine" in
    sglang-releases) tests=(tests/real_engines/test_sglang_disagg_releases.py
                            tests/real_engines/test_sglang_preflight_fixtures.py
                            tests/real_engines/test_sglang_admission_limits.py) ;;
    *)
      local file
      for file in tests/real_engines/test_"$engine"_*.py; do
        case "$file" in
          tests/real_engines/test_sglang_disagg_releases.py | tests/real_engines/test_sglang_preflight_fixtures.py \
            | tests/real_engines/test_sglang_admission_limits.py) ;;
          *) tests+=("$file") ;;
        esac
      done
      ;;
  esac
  echo "== $engine: ${tests[*]}"
  local rc=0
  "$venv/bin/python" -m pytest -rs -p no:cacheprovider --junitxml="$report" "${tests[@]}" || rc=$?
  local reports=("$report")
  if [ "$engine" != sglang-releases ]; then
    # the validate tests that run this engine (their names carry it): a second
    # report, checked the same way (one run with -k would drop the other files' tests)
    validate_report="$(mktemp)"
    reports+=("$validate_report")
    echo "== $engine: tests/real_engines/test_validate_real_logs.py -k $engine"
    "$venv/bin/python" -m pytest -rs -p no:cacheprovider --junitxml="$validate_report" \
      tests/real_engines/test_validate_real_logs.py -k "$engine" || rc=$?
  fi
  "$venv/bin/python" - "$engine" "$rc" "${reports[@]}" <<'EOF'
import sys
import xml.etree.ElementTree as ET

engine, rc, reports = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
for report in reports:
    suite = ET.parse(report).getroot()
    if suite.tag == "testsuites":
        suite = suite[0]
    tests, skipped = int(suite.get("tests", 0)), int(suite.get("skipped", 0))
    bad = int(suite.get("failures", 0)) + int(suite.get("errors", 0))
    if rc != 0 or bad or skipped or tests == 0:
        print(f"real-engines.sh: {engine}: pytest exit {rc}, {tests} tests, {bad} failed or errored, "
              f"{skipped} skipped (a skip means the engine did not import in its environment)", file=sys.stderr)
        sys.exit(1)
EOF
  rm -f "${reports[@]}"
}

for engine in "${engines[@]}"; do
  build_venv "$engine"
done
[ "$install_only" -eq 1 ] && exit 0
for engine in "${engines[@]}"; do
  run_tests "$engine"
done
