#!/usr/bin/env bash
# Validate manifests offline against strict schemas generated from the pinned sources:
#   tools/kubeconform.sh [DIR_OR_FILE...]   (default: rendered/ and, if present, bootstrap/ = the Argo CD Application)
# The core kinds' schemas are those of KUBERNETES (a pin's value: $KUBERNETES_VERSION unless set, so
# `KUBERNETES=$KUBERNETES_PREVIOUS_VERSION` checks the previous line; `make validate` runs both).
# Fails on any invalid object, any object without a schema, and any skipped object
# other than a Kustomization or a kustomize Component (bootstrap/argocd-settings/, for the site's own Argo CD). Never uses -ignore-missing-schemas (typos would pass).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/common.sh"

kc="$(tool_bin kubeconform)"
[ -x "$kc" ] || { echo "ERROR: $kc missing: run 'make tools' (or tools/build.sh kubeconform)" >&2; exit 1; }

kubernetes="${KUBERNETES:-$KUBERNETES_VERSION}"
case " $KUBERNETES_VERSION $KUBERNETES_PREVIOUS_VERSION " in
  *" $kubernetes "*) ;;
  *) echo "ERROR: KUBERNETES=$kubernetes is not a pinned line ($KUBERNETES_VERSION, $KUBERNETES_PREVIOUS_VERSION)" >&2
     exit 2 ;;
esac
# Regenerate schemas when a pin or the generator changes (stamp = their content); one set per Kubernetes line.
schemas="$CACHE/schemas-$kubernetes"
# The CRDs' directory is named after what it holds (the components' CRDs included).
crds="$("$here/crds.sh")"
stamp="$({ cat "$REPO_ROOT/generator/versions.env" "$here/schemas.py" "$here/crds.sh"; echo "$crds"; } | sha256sum | cut -c1-16)"
if [ "$(cat "$schemas/.stamp" 2>/dev/null)" != "$stamp" ]; then
  py="${PYTHON:-python3}"
  [ -x "$REPO_ROOT/.venv/bin/python" ] && [ -z "${PYTHON:-}" ] && py="$REPO_ROOT/.venv/bin/python"
  openapi="$("$here/module-dir.sh" k8s.io/kubernetes "$kubernetes")/api/openapi-spec/v3"
  tmp="$(mktemp -d "$CACHE/schemas.XXXXXX")"
  "$py" "$here/schemas.py" "$crds" "$openapi" "$tmp" >&2
  echo "$stamp" > "$tmp/.stamp"
  rm -rf "$schemas" && mv "$tmp" "$schemas"
fi

targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  targets=("$REPO_ROOT/rendered")
  [ -d "$REPO_ROOT/bootstrap" ] && targets+=("$REPO_ROOT/bootstrap")
fi
for t in "${targets[@]}"; do [ -e "$t" ] || { echo "ERROR: $t does not exist" >&2; exit 1; }; done

tpl='{{.Group}}/{{.ResourceKind}}_{{.ResourceAPIVersion}}.json'
set +e
out="$("$kc" -strict -summary -verbose -output text -skip Kustomization,Component \
  -schema-location "$schemas/core/$tpl" -schema-location "$schemas/crd/$tpl" "${targets[@]}")"
rc=$?
set -e
echo "$out"
echo "(core kinds: Kubernetes $kubernetes)"

summary="$(grep '^Summary:' <<<"$out" || true)"
[ -n "$summary" ] || { echo "ERROR: kubeconform printed no summary" >&2; exit 1; }
skipped="$(sed -n 's/.*Skipped: \([0-9]*\).*/\1/p' <<<"$summary")"
kustomizations="$(grep -c -E ' (Kustomization|Component) skipped$' <<<"$out" || true)"
found="$(sed -n 's/^Summary: \([0-9]*\) resource.*/\1/p' <<<"$summary")"
[ "$found" -gt 0 ] || { echo "ERROR: no resources found in ${targets[*]}" >&2; exit 1; }
if [ "$skipped" -ne "$kustomizations" ]; then
  echo "ERROR: $((skipped - kustomizations)) resource(s) skipped that are not Kustomizations or Components" >&2
  exit 1
fi
exit $rc
