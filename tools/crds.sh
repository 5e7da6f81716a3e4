#!/usr/bin/env bash
# Assemble the pinned upstream CRDs into $CACHE/crds-<stamp>/ and print that directory.
# The stamp hashes the pins and this script, so a changed pin gets a fresh directory, and an
# existing one is never rewritten while a concurrent test run reads it.
# They are read from the Go module cache (tools/module-dir.sh): never copied into the repo.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/common.sh"

# Each component's CRDs, as its folder names them (generator/components/<name>/): module, version, globs.
python="$(project_python)" || exit 1
component_crds="$(cd "$REPO_ROOT" && "$python" -m generator.components crds)"
stamp="$({ cat "$REPO_ROOT/generator/versions.env" "$here/crds.sh"; echo "$component_crds"; } | sha256sum | cut -c1-16)"
out="$CACHE/crds-$stamp"
if [ -d "$out" ]; then echo "$out"; exit 0; fi
tmp="$(mktemp -d "$CACHE/crds.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT

# copy_crds MODULE VERSION GLOB...: copy matching files (paths relative to the module root).
copy_crds() {
  local module="$1" version="$2"; shift 2
  local dir n=0
  dir="$("$here/module-dir.sh" "$module" "$version")"
  for g in "$@"; do
    for f in $dir/$g; do
      [ -f "$f" ] || continue
      cp "$f" "$tmp/" && chmod u+w "$tmp/$(basename "$f")"
      n=$((n + 1))
    done
  done
  # A moved upstream path must fail loudly, not yield an empty CRD set.
  [ "$n" -gt 0 ] || { echo "ERROR: no CRDs matched $* in $module@$version" >&2; exit 1; }
}

while read -r -a crds; do
  copy_crds "${crds[@]}"
done <<<"$component_crds"
# The Prometheus Operator's kinds the tree renders (cluster.monitoring), as upstream commits them. Its root module
# at the newest version the module proxy serves; the kinds' schemas there are those of the types module's latest.
copy_crds github.com/prometheus-operator/prometheus-operator "$PROMETHEUS_OPERATOR_VERSION" \
  'example/prometheus-operator-crd/monitoring.coreos.com_servicemonitors.yaml' \
  'example/prometheus-operator-crd/monitoring.coreos.com_podmonitors.yaml' \
  'example/prometheus-operator-crd/monitoring.coreos.com_prometheusrules.yaml'
# argo-cd's module needs a newer Go to extract; module-dir.sh unpacks its verified zip.
copy_crds github.com/argoproj/argo-cd/v3 "$ARGOCD_VERSION" 'manifests/crds/application-crd.yaml' 'manifests/crds/appproject-crd.yaml' \
  'manifests/crds/applicationset-crd.yaml'

# mv of a directory onto a missing name is atomic; if a concurrent run won the race, keep theirs.
mv -T "$tmp" "$out" 2>/dev/null || rm -rf "$tmp"
trap - EXIT
echo "$out"
