#!/usr/bin/env bash
# Re-resolve the Python dependencies and write constraints.txt: every distribution the development
# environment installs (pyproject.toml's dependencies and its test and report extras), at one exact version.
# pyproject.toml keeps the ranges gpugen accepts; constraints.txt is what `make` and CI install, so a new
# upstream release changes nothing until someone runs `make lock` and commits the result.
set -euo pipefail
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${PYTHON:-python3}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

"$PYTHON" -m venv "$work/venv"
"$work/venv/bin/python" -m pip install --quiet --upgrade pip
"$work/venv/bin/python" -m pip install --quiet -e "$REPO_ROOT[test,report]"
{
  echo "# Exact versions of every Python distribution \`make\` and CI install (pip's -c): made by \`make lock\`"
  echo "# (tools/lock.sh) from pyproject.toml's ranges with $("$work/venv/bin/python" -c 'import platform; print("Python", platform.python_version())')."
  echo "# Edit pyproject.toml, not this file; then \`make lock\` and commit both."
  # setuptools is the venv's own seed, not a dependency; the editable gpugen is this checkout.
  "$work/venv/bin/python" -m pip freeze --all --exclude-editable | grep -v -i '^setuptools=='
} > "$REPO_ROOT/constraints.txt.new"
mv "$REPO_ROOT/constraints.txt.new" "$REPO_ROOT/constraints.txt"
echo "constraints.txt: $(grep -c '==' "$REPO_ROOT/constraints.txt") distributions"
