# Sourced by tools/build.sh: builds Kyverno's CLI and admission controller with
# tools/patches/kyverno-sdk-index-platform.patch (its header says why). The wrapper module replaces
# github.com/kyverno/sdk with a patched copy of the version the pinned Kyverno requires. `<binary>.patch`
# records the patch's hash: a binary built without it (or with another patch) is rebuilt.
KYVERNO_SDK_PATCH="$REPO_ROOT/tools/patches/kyverno-sdk-index-platform.patch"

# kyverno_build TOOL PACKAGE (relative to github.com/kyverno/kyverno)
kyverno_build() {
  local tool="$1" pkg="github.com/kyverno/kyverno/$2" module=github.com/kyverno/kyverno version bin hash
  version="$(tool_version "$tool")"
  bin="$(tool_bin "$tool")"
  hash="$(sha256sum "$KYVERNO_SDK_PATCH" | cut -c1-12)"
  export -f make_wrapper
  # Under the wrapper's lock, as build() takes it: the Go build must not see go.mod change half-way.
  bash -euo pipefail -c '
    exec 9>"$1.lock" && flock 9
    make_wrapper "$1" "$2" "$3" >/dev/null
    sdk="$(go mod edit -json "$(go mod download -json "$2@$3" | jq -r .GoMod)" |
      jq -r ".Require[] | select(.Path == \"github.com/kyverno/sdk\") | .Version")"
    patched="$4/kyverno-sdk-$sdk-$5"
    if [ ! -f "$patched/.ready" ]; then
      rm -rf "$patched"
      cp -r "$(go mod download -json "github.com/kyverno/sdk@$sdk" | jq -r .Dir)" "$patched"
      chmod -R u+w "$patched"
      patch -d "$patched" -p1 --quiet <"$6"
      touch "$patched/.ready"
    fi
    go mod edit -replace="github.com/kyverno/sdk=$patched"' \
    _ "$WRAP_DIR/${module//\//_}-$version" "$module" "$version" "$WRAP_DIR" "$hash" "$KYVERNO_SDK_PATCH" || return 1
  if [ -x "$bin" ] && [ "$(cat "$bin.patch" 2>/dev/null)" != "$hash" ]; then
    echo "$tool: the cached binary lacks $(basename "$KYVERNO_SDK_PATCH"): rebuilding"
    rm -f "$bin"
  fi
  build "$tool" "$module" "$pkg" "-s -w" || return 1
  echo "$hash" >"$bin.patch"
}
