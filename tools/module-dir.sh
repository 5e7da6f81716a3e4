#!/usr/bin/env bash
# Print the local directory of MODULE@VERSION, downloading it into the Go module
# cache if needed. Upstream files (CRDs, OpenAPI specs) are read from here, never copied.
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: $0 MODULE VERSION" >&2; exit 2; }
source "$(dirname "$0")/common.sh"
cd "$CACHE"  # outside any go.mod
out="$(go mod download -json "$1@$2")" || true
dir="$(jq -r '.Dir // empty' <<<"$out")"
if [ -z "$dir" ]; then
  # A module whose go.mod asks for a newer Go than ours is still downloaded and
  # checksum-verified (.Zip + .ziphash), but go refuses to extract it. We only read
  # data files from it, so unpack the verified zip ourselves.
  zip="$(jq -r '.Zip // empty' <<<"$out")"
  if jq -r '.Error // empty' <<<"$out" | grep -q 'requires go >=' && [ -f "$zip" ] && [ -f "${zip%.zip}.ziphash" ]; then
    dir="$CACHE/modsrc/$1@$2"
    if [ ! -d "$dir" ]; then
      tmp="$(mktemp -d "$CACHE/modsrc.XXXXXX")"
      unzip -q "$zip" -d "$tmp"
      mkdir -p "$(dirname "$dir")"
      mv "$tmp/$1@$2" "$dir" && rm -rf "$tmp"
    fi
  fi
fi
[ -n "$dir" ] && [ -d "$dir" ] || { echo "ERROR: no directory for $1@$2: $out" >&2; exit 1; }
echo "$dir"
