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

# Version pinned for a tool name.
tool_version() {
  case "$1" in
    kubeconform) echo "$KUBECONFORM_VERSION" ;;
    etcd) echo "$ETCD_VERSION" ;;
    kube-apiserver|kube-controller-manager|kube-scheduler) echo "$KUBERNETES_VERSION" ;;
    kyverno|kyverno-controller) echo "$KYVERNO_VERSION" ;;
    kueue) echo "$KUEUE_VERSION" ;;
    jobset) echo "$JOBSET_VERSION" ;;
    trainer) echo "$TRAINER_VERSION" ;;
    helm) echo "$HELM_VERSION" ;;
    kwok) echo "$KWOK_VERSION" ;;
    crane) echo "$GGCR_VERSION" ;;
    argocd) echo "$ARGOCD_VERSION" ;;
    *) echo "ERROR: unknown tool $1" >&2; return 1 ;;
  esac
}

# Path of the cached binary for a tool at its pinned version.
tool_bin() { echo "$BIN_DIR/$1-$(tool_version "$1")"; }

# Timing report for each build step: `tool: cached` or `tool: built in Ns`
# (START is the $SECONDS value when the build began).
report_cached() { echo "$1: cached ($(tool_bin "$1"))"; }
report_built() { echo "$1: built in $((SECONDS - $2))s"; }
