# Shared settings for the tool scripts: pinned versions, cache layout, timing.
# Sourced (not executed) by tools/*.sh.
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# versions.env is the one place versions are pinned.
set -a
# shellcheck disable=SC1091
source "$REPO_ROOT/generator/versions.env"
set +a

# Everything downloaded or built lives outside the repo, keyed by version.
CACHE="${GPUGEN_CACHE:-$HOME/.cache/gpugen}"
BIN_DIR="$CACHE/bin"
LOG_DIR="$CACHE/logs"
WRAP_DIR="$CACHE/wrappers"
mkdir -p "$BIN_DIR" "$LOG_DIR" "$WRAP_DIR"

# Never let go silently fetch another toolchain; fail with the local one instead.
export GOTOOLCHAIN="${GOTOOLCHAIN:-local}"
export GOFLAGS="${GOFLAGS:--buildvcs=false}"

# The project's Python, which reads the components' facts (their folders' settings are pydantic models): make's
# virtualenv, made here when missing; GPUGEN_PYTHON names another one that has the project's dependencies (the tests
# set it to their own).
project_python() {
  if [ -n "${GPUGEN_PYTHON:-}" ]; then echo "$GPUGEN_PYTHON"; return; fi
  [ -e "$REPO_ROOT/.venv/.installed" ] || make -s -C "$REPO_ROOT" .venv/.installed >&2 ||
    { echo "ERROR: could not make the virtualenv (make .venv/.installed)" >&2; return 1; }
  echo "$REPO_ROOT/.venv/bin/python"
}

# Every tool and the pin it is built at: tools/tools.list, the one list of them, with the components' tools where it
# says @components (each component's folder declares its own: generator/components/<name>/). Read once, by the
# scripts that build or look up tools (load_component_tools at their top), not by every script that sources this.
TOOLS_LIST="$REPO_ROOT/tools/tools.list"
COMPONENT_TOOLS="${COMPONENT_TOOLS:-}"
load_component_tools() {
  [ -n "$COMPONENT_TOOLS" ] && return
  local python
  python="$(project_python)" || exit 1
  COMPONENT_TOOLS="$(cd "$REPO_ROOT" && "$python" -m generator.components tools)" ||
    { echo "ERROR: python -m generator.components tools failed" >&2; exit 1; }
}
tools_lines() { load_component_tools; awk -v c="$COMPONENT_TOOLS" '$1 == "@components" { print c; next } { print }' "$TOOLS_LIST"; }
all_tools() { tools_lines | awk '!/^#/ && NF && $3 != "optional" { print $1 }'; }

# Version pinned for a tool name.
tool_version() {
  local key
  key="$(tools_lines | awk -v t="$1" '!/^#/ && $1 == t { print $2 }')"
  [ -n "$key" ] || { echo "ERROR: unknown tool $1 (not in tools/tools.list nor a component's tools)" >&2; return 1; }
  echo "${!key}"
}

# How a component's tool is built when its folder says (module, package, ldflags); empty for the others.
component_recipe() { awk -v t="$1" '$1 == t && NF > 3 { $1 = $2 = $3 = ""; sub(/^ +/, ""); print }' <<<"$COMPONENT_TOOLS"; }

# The throw-away wrapper module that builds MODULE at VERSION (tools/build.sh).
wrapper_dir() { echo "$WRAP_DIR/${1//\//_}-$2"; }

# Path of the cached binary for a tool at its pinned version.
tool_bin() { echo "$BIN_DIR/$1-$(tool_version "$1")"; }

# Timing report for each build step: `tool: cached` or `tool: built in Ns`
# (START is the $SECONDS value when the build began).
report_cached() { echo "$1: cached ($(tool_bin "$1"))"; }
report_built() { echo "$1: built in $((SECONDS - $2))s"; }
