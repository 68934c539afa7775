#!/usr/bin/env bash
# install-deps.sh installs the Debian packages the tests need on a fresh machine of our kind and
# builds the Kubernetes binaries into the per-machine cache. Safe to run again: it skips what is there.
# Arguments name more packages; protobuf-compiler (protoc, for make generate) is always checked,
# and must be the version hack/generate-proto.sh pins (Debian 12: 3.21.12-3+deb12u1).
set -euo pipefail
hack=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

packages=()
# Debian's Python with numpy, pandas and matplotlib: the code interpreter's tests run their kernels
# with /usr/bin/python3 (internal/sandboxd/interpreter, test/integration/interpreter).
interpreter_packages=(python3 python3-numpy python3-pandas python3-matplotlib)
for p in protobuf-compiler "${interpreter_packages[@]}" "$@"; do
  dpkg -s "$p" >/dev/null 2>&1 || packages+=("$p")
done
if [[ ${#packages[@]} -gt 0 ]]; then
  if [[ $(id -u) -ne 0 ]]; then
    echo "install-deps: missing Debian packages ${packages[*]}; run: sudo apt-get update && sudo apt-get install -y ${packages[*]}" >&2
    exit 1
  fi
  echo "install-deps: installing ${packages[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${packages[@]}"
fi
"$hack/build-k8s.sh" kube-apiserver etcd >/dev/null
