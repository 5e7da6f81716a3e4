#!/usr/bin/env bash
# Build the pinned upstream tools from their Go modules into the cache:
#   tools/build.sh [TOOL ...]        (default: every tool in tools/tools.list not marked optional, in that order)
# A tool whose versioned binary is already cached is skipped. Each build runs in a
# throw-away wrapper module under the cache (never committed), so upstream `replace`
# lines that `go install pkg@version` would refuse can be carried over. Tools from one
# module (kube-apiserver, kube-controller-manager, kube-scheduler) share one wrapper,
# so they resolve the same dependency graph and share compiled packages.
set -euo pipefail
source "$(dirname "$0")/common.sh"
# Which tools there are and how the components' are built: read once here, for every lookup below.
load_component_tools

# Write a wrapper go.mod requiring MODULE@VERSION, carrying over the upstream replace
# lines that point at other modules. Kubernetes' `=> ./staging/src/...` lines are
# mapped to the published v0.Y.Z of each staging module.
make_wrapper() {
  local dir="$1" module="$2" version="$3"
  if [ -f "$dir/.ready" ]; then cd "$dir"; return 0; fi
  rm -rf "$dir" && mkdir -p "$dir" && cd "$dir"
  go mod init "gpugen.local/wrap/$(basename "$dir")"
  local dl upstream_gomod
  dl="$(go mod download -json "$module@$version")" || { jq -r '.Error' <<<"$dl" >&2; return 1; }
  upstream_gomod="$(jq -r '.GoMod' <<<"$dl")"
  local staging_version="v0.${version#v1.}"  # Kubernetes' v1.Y.Z -> its staging modules' v0.Y.Z
  go mod edit -json "$upstream_gomod" | jq -r --arg sv "$staging_version" '
    .Replace[]? |
    (.Old.Path + (if .Old.Version then "@" + .Old.Version else "" end)) as $old |
    if .New.Version then "\($old)=\(.New.Path)@\(.New.Version)"
    elif (.New.Path | startswith("./staging/src/")) then "\($old)=\(.Old.Path)@\($sv)"
    else "SKIP local replace \($old) => \(.New.Path)" end' |
  while read -r rep; do
    case "$rep" in
      SKIP*) echo "$rep" ;;
      *) echo "replace $rep"; go mod edit -replace="$rep" ;;
    esac
  done
  go mod edit -require="$module@$version"
  touch .ready
}

# build_failed TOOL LOG: the log's tail and one ERROR line naming the tool.
build_failed() {
  tail -n 20 "$2" >&2
  echo "ERROR: could not build $1 (see $2)" >&2
}

# build TOOL MODULE PACKAGE [LDFLAGS [WRAPPER]] (WRAPPER: the wrapper module's directory, by default one per
# MODULE@version)
build() {
  local tool="$1" module="$2" pkg="$3" ldflags="${4:-}" wrapper="${5:-}"
  local version bin log
  version="$(tool_version "$tool")"
  bin="$(tool_bin "$tool")"
  log="$LOG_DIR/build-$tool-$version.log"
  if [ -x "$bin" ]; then
    report_cached "$tool"
    return 0
  fi
  echo "$tool: building $pkg@$version (log: $log)"
  local start=$SECONDS rc
  # A separate bash process: `set -e` is ignored inside functions/subshells called
  # from an `||` context, so a plain ( ... ) here would carry on past a failed step.
  export -f make_wrapper
  set +e
  # One wrapper per module@version unless given; a lock keeps two builds from sharing it at once.
  [ -n "$wrapper" ] || wrapper="$(wrapper_dir "$module" "$version")"
  CGO_ENABLED=0 bash -euxo pipefail -c '
    exec 9>"$1.lock" && flock 9
    make_wrapper "$1" "$2" "$3"
    go get "$4@$3"
    go build -trimpath -ldflags "$5" -o "$6.tmp" "$4"
    mv "$6.tmp" "$6"' _ "$wrapper" "$module" "$version" "$pkg" "$ldflags" "$bin" >"$log" 2>&1
  rc=$?
  set -e
  [ $rc -eq 0 ] || { build_failed "$tool" "$log"; return 1; }
  ln -sfn "$(basename "$bin")" "$BIN_DIR/$tool"
  report_built "$tool" "$start"
}

# build_main TOOL MODULE MAIN_DIR LDFLAGS PACKAGE...: build our own small main (MAIN_DIR, in this repo)
# against MODULE at the tool's pinned version, in the same kind of wrapper module as build(). For tools whose
# upstream main links far more than we run (Argo CD's links every component).
build_main() {
  local tool="$1" module="$2" main_dir="$3" ldflags="$4"; shift 4
  local version bin log pkgs=()
  version="$(tool_version "$tool")"
  bin="$(tool_bin "$tool")"
  log="$LOG_DIR/build-$tool-$version.log"
  # The cached binary is keyed by the pinned version and by our main's source.
  local src_hash
  src_hash="$(cat "$main_dir"/*.go | sha256sum | cut -c1-12)"
  if [ -x "$bin" ] && [ "$(cat "$bin.src" 2>/dev/null)" != "$src_hash" ]; then
    echo "$tool: $main_dir changed since the cached build: rebuilding"
    rm -f "$bin"
  fi
  if [ -x "$bin" ]; then report_cached "$tool"; return 0; fi
  for p in "$@"; do pkgs+=("$p@$version"); done
  echo "$tool: building $main_dir against $module@$version (log: $log)"
  local start=$SECONDS rc wrapper
  wrapper="$(wrapper_dir "$module" "$version")"
  export -f make_wrapper
  set +e
  CGO_ENABLED=0 bash -euxo pipefail -c '
    exec 9>"$1.lock" && flock 9
    make_wrapper "$1" "$2" "$3"
    cp "$4"/*.go .
    go get "${@:7}"
    go build -trimpath -ldflags "$5" -o "$6.tmp" .
    mv "$6.tmp" "$6"' _ "$wrapper" "$module" "$version" "$main_dir" "$ldflags" "$bin" "${pkgs[@]}" >"$log" 2>&1
  rc=$?
  set -e
  [ $rc -eq 0 ] || { build_failed "$tool" "$log"; return 1; }
  echo "$src_hash" >"$bin.src"
  ln -sfn "$(basename "$bin")" "$BIN_DIR/$tool"
  report_built "$tool" "$start"
}

# kube-apiserver refuses to start cleanly with an unparsable version: stamp it (k8s_ldflags VERSION).
k8s_ldflags() {
  local v="$1" minor major
  major="${v#v}"; major="${major%%.*}"
  minor="${v#v*.}"; minor="${minor%%.*}"
  local f=""
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    f+=" -X $p.gitVersion=$v -X $p.gitMajor=$major -X $p.gitMinor=$minor"
    f+=" -X $p.gitTreeState=clean -X $p.buildDate=1970-01-01T00:00:00Z"
  done
  echo "-s -w$f"
}

# Prometheus' Go module v0.3XY.Z is its release 3.XY.Z.
prometheus_release() {
  local v="${PROMETHEUS_VERSION#v0.}"
  echo "3.$((10#${v%%.*} - 300)).${v#*.}"
}

build_tool() {
  case "$1" in
    kubeconform) build kubeconform github.com/yannh/kubeconform github.com/yannh/kubeconform/cmd/kubeconform \
      "-s -w -X main.version=$KUBECONFORM_VERSION" ;;
    # etcd 3.6 and 3.7: the server module's root package is the etcd binary's main.
    etcd|etcd-previous) build "$1" go.etcd.io/etcd/server/v3 go.etcd.io/etcd/server/v3 "-s -w" ;;
    kube-apiserver|kube-controller-manager|kube-scheduler)
      build "$1" k8s.io/kubernetes "k8s.io/kubernetes/cmd/$1" "$(k8s_ldflags "$KUBERNETES_VERSION")" ;;
    # The previous minor's API server, for the API-server tier on both lines.
    kube-apiserver-previous) build "$1" k8s.io/kubernetes k8s.io/kubernetes/cmd/kube-apiserver \
      "$(k8s_ldflags "$KUBERNETES_PREVIOUS_VERSION")" ;;
    kyverno) . "$REPO_ROOT/tools/kyverno.sh"; kyverno_build kyverno cmd/cli/kubectl-kyverno ;;
    # Kyverno's admission controller (webhooks, policy engine), for the simulated cluster.
    kyverno-controller) . "$REPO_ROOT/tools/kyverno.sh"; kyverno_build kyverno-controller cmd/kyverno ;;
    # Kyverno's cleanup controller: it runs the DeletingPolicies (finished TrainJobs).
    kyverno-cleanup-controller) . "$REPO_ROOT/tools/kyverno.sh"; kyverno_build kyverno-cleanup-controller cmd/cleanup-controller ;;
    # Optional, never built by CI: the same with the image-index patch (tools/kyverno.sh).
    kyverno-patched) . "$REPO_ROOT/tools/kyverno.sh"; kyverno_patched_build kyverno-patched cmd/cli/kubectl-kyverno ;;
    kyverno-controller-patched) . "$REPO_ROOT/tools/kyverno.sh"
      kyverno_patched_build kyverno-controller-patched cmd/kyverno ;;
    helm) build helm helm.sh/helm/v4 helm.sh/helm/v4/cmd/helm \
      "-s -w -X helm.sh/helm/v4/internal/version.version=$HELM_VERSION" ;;
    kwok) build kwok sigs.k8s.io/kwok sigs.k8s.io/kwok/cmd/kwok "-s -w" ;;
    # Argo CD's application controller, repo-server and ApplicationSet controller only (tools/argocd/main.go); its
    # module needs a newer Go.
    argocd) GOTOOLCHAIN="$ARGOCD_GO_TOOLCHAIN" build_main argocd github.com/argoproj/argo-cd/v3 \
      "$REPO_ROOT/tools/argocd" "-s -w -X github.com/argoproj/argo-cd/v3/common.version=${ARGOCD_VERSION#v}" \
      github.com/argoproj/argo-cd/v3/cmd/argocd-application-controller/commands \
      github.com/argoproj/argo-cd/v3/cmd/argocd-repo-server/commands \
      github.com/argoproj/argo-cd/v3/cmd/argocd-applicationset-controller/commands \
      github.com/argoproj/argo-cd/v3/common github.com/argoproj/argo-cd/v3/util/log ;;
    # The server with only the kubernetes service discovery (what a Prometheus Operator's configuration uses);
    # promtool (rule checks and unit tests) from the same wrapper module.
    prometheus|promtool) GOFLAGS="-tags=remove_all_sd,enable_kubernetes_sd" build "$1" github.com/prometheus/prometheus \
      "github.com/prometheus/prometheus/cmd/$1" "-s -w -X github.com/prometheus/common/version.Version=$(
        prometheus_release) -X github.com/prometheus/common/version.Revision=$PROMETHEUS_VERSION" ;;
    crane) build crane github.com/google/go-containerregistry github.com/google/go-containerregistry/cmd/crane "-s -w" ;;
    # A component's tool whose folder gives its module, package and ldflags (generator/components/<name>/).
    *) local recipe module pkg ldflags
       recipe="$(component_recipe "$1")"
       [ -n "$recipe" ] || { echo "ERROR: unknown tool '$1' (known: ${ALL_TOOLS[*]})" >&2; return 1; }
       read -r module pkg ldflags <<<"$recipe"
       build "$1" "$module" "$pkg" "$ldflags" ;;
  esac
}

# Every tool, cheapest first (tools/tools.list); CI builds them all.
mapfile -t ALL_TOOLS < <(all_tools)
tools=("$@")
[ ${#tools[@]} -gt 0 ] || tools=("${ALL_TOOLS[@]}")
failed=()
for t in "${tools[@]}"; do
  build_tool "$t" || failed+=("$t")   # keep going: one failure should not hide the others
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "ERROR: could not build: ${failed[*]}" >&2
  exit 1
fi
