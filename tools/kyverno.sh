# Sourced by tools/build.sh: Kyverno's CLI and admission controller.
#
# kyverno and kyverno-controller are the releases as they are (KYVERNO_VERSION from its Go module, nothing
# patched): the policies are written for, and tested with, what a platform runs from the chart's released image.
# kyverno-patched and kyverno-controller-patched are optional (never built by CI, nothing requires them): the
# same commands with tools/patches/kyverno-sdk-index-platform.patch (its header says why), in a wrapper module
# of their own that replaces github.com/kyverno/sdk with a patched copy of the version the pinned Kyverno
# requires. `<binary>.patch` records the patch's hash: a binary built with another patch is rebuilt.
KYVERNO_SDK_PATCH="$REPO_ROOT/tools/patches/kyverno-sdk-index-platform.patch"

# kyverno_build TOOL PACKAGE (relative to github.com/kyverno/kyverno): the released command.
kyverno_build() {
  local tool="$1" bin
  bin="$(tool_bin "$tool")"
  # A cache from before the released builds holds a patched binary under this name, and its wrapper module
  # replaces kyverno/sdk.
  if [ -f "$bin.patch" ]; then
    echo "$tool: the cached binary carries $(basename "$KYVERNO_SDK_PATCH"): rebuilding as released"
    rm -f "$bin" "$bin.patch"
    rm -rf "$(wrapper_dir github.com/kyverno/kyverno "$(tool_version "$tool")")"
  fi
  build "$tool" github.com/kyverno/kyverno "github.com/kyverno/kyverno/$2" "-s -w"
}

# kyverno_patched_build TOOL PACKAGE: the command with the patched kyverno/sdk.
kyverno_patched_build() {
  local tool="$1" pkg="github.com/kyverno/kyverno/$2" module=github.com/kyverno/kyverno version bin hash wrapper
  version="$(tool_version "$tool")"
  bin="$(tool_bin "$tool")"
  hash="$(sha256sum "$KYVERNO_SDK_PATCH" | cut -c1-12)"
  wrapper="$(wrapper_dir "$module" "$version")-sdk-patched"
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
    _ "$wrapper" "$module" "$version" "$WRAP_DIR" "$hash" "$KYVERNO_SDK_PATCH" || return 1
  if [ -x "$bin" ] && [ "$(cat "$bin.patch" 2>/dev/null)" != "$hash" ]; then
    echo "$tool: the cached binary lacks this $(basename "$KYVERNO_SDK_PATCH"): rebuilding"
    rm -f "$bin"
  fi
  build "$tool" "$module" "$pkg" "-s -w" "$wrapper" || return 1
  echo "$hash" >"$bin.patch"
}
