#!/usr/bin/env bash
# verify-tracked.sh fails when a tracked file is a build output: an executable binary (ELF, Mach-O,
# PE) or any file over 1 MiB outside the generated bundles in dist/ and the chart's CRDs.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
limit=$((1 << 20))
bad=0
while IFS= read -r -d '' f; do
  [[ -f "$f" ]] || continue
  case "$f" in dist/* | charts/paddock/crds/*) continue ;; esac
  size=$(stat -c %s "$f")
  if ((size > limit)); then
    echo "verify: $f is $size bytes, over 1 MiB: build outputs and large data do not belong in git" >&2
    bad=1
    continue
  fi
  magic=$(head -c 4 "$f" | od -An -tx1 | tr -d ' \n')
  case "$magic" in
  7f454c46 | cffaedfe | cefaedfe | feedfacf | feedface | 4d5a*)
    echo "verify: $f is an executable binary; remove it (git rm --cached) and build it instead" >&2
    bad=1
    ;;
  esac
done < <(git ls-files -z)
if ((bad)); then
  echo "verify: tracked build outputs found; .gitignore lists the usual ones." >&2
  exit 1
fi
echo "verify: no tracked binaries or files over 1 MiB."
