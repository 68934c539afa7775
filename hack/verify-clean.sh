#!/usr/bin/env bash
# verify-clean.sh fails when the work tree differs from HEAD or holds untracked files, which after
# `make generate` means generated files were not regenerated and committed.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
status=$(git status --porcelain --untracked-files=all)
if [[ -n "$status" ]]; then
  echo "verify: the tree differs from what is committed after regeneration:" >&2
  echo "$status" >&2
  git --no-pager diff --stat >&2
  echo "verify: run 'make generate' and commit the result." >&2
  exit 1
fi
echo "verify: generated files are up to date."
