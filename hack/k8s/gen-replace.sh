#!/usr/bin/env bash
# Prints the replace block that pins every k8s.io/kubernetes staging module to its published
# version. k8s.io/kubernetes replaces them with ./staging paths, which do not exist in the module
# zip, so a consumer must point each one at the matching v0.x release.
set -euo pipefail
version=${1:-v1.37.2}
staging=v0.${version#v1.}
dir=$(go mod download -json "k8s.io/kubernetes@${version}" | sed -n 's/.*"Dir": "\(.*\)",/\1/p')
echo "replace ("
grep '=> ./staging' "${dir}/go.mod" | awk -v v="${staging}" '{print "\t" $1 " => " $1 " " v}'
echo ")"
