#!/usr/bin/env bash
# Which CI path a change takes: prints `inventory` when every file changed since BASE is the inventory or what is
# rendered from it, else `full`.
#   tools/ci_path.sh [BASE]     (BASE: a commit or branch, e.g. origin/main; none, or one git cannot resolve: full)
# The inventory path (`make check-inventory`) runs only the checks whose answers depend on the inventory; a change
# to anything else (generator/, tools/, tests/, simulation/, the pins, CI itself) needs the full suite.
set -euo pipefail
base="${1:-}"
[ -n "$base" ] || { echo full; exit 0; }
git rev-parse --verify --quiet "$base^{commit}" >/dev/null || { echo full; exit 0; }
changed="$(git diff --name-only "$base"...HEAD)"
[ -n "$changed" ] || { echo full; exit 0; }
while IFS= read -r path; do
  case "$path" in
    gpu_classes.yaml|rendered/*|bootstrap/*|docs/runtimes.md) ;;
    *) echo full; exit 0 ;;
  esac
done <<<"$changed"
echo inventory
