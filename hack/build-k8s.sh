#!/usr/bin/env bash
# build-k8s.sh [BINARY...] builds Kubernetes and etcd binaries from their official Go modules into
# a cache keyed by module version, and prints the directory that holds them.
#
# The cache lives outside the work tree (PADDOCK_CACHE_DIR, default ~/.cache/paddock) so that
# clean clones on one machine share it; a fresh machine builds once (about 10 minutes on 2 cores
# for kube-apiserver). Binaries: kube-apiserver etcd kube-controller-manager kube-scheduler kubelet.
# With no argument it builds what envtest needs: kube-apiserver and etcd.
set -euo pipefail

hack=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache=${PADDOCK_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/paddock}

module_version() { # module_version DIR MODULE
  (cd "$1" && go list -m -f '{{.Version}}' "$2")
}

k8s_version=$(module_version "$hack/k8s" k8s.io/kubernetes)
etcd_version=$(module_version "$hack/etcd" go.etcd.io/etcd/server/v3)
go_version=$(go env GOVERSION)
dir="$cache/bin/k8s-${k8s_version}-etcd-${etcd_version}-${go_version}"
mkdir -p "$dir"

build() { # build NAME MODULE_DIR PACKAGE
  local name=$1 moddir=$2 pkg=$3
  if [[ -x "$dir/$name" ]]; then
    return
  fi
  echo "build-k8s: building $name into $dir (first build on this machine takes minutes)" >&2
  # -trimpath and no VCS stamping keep the binary independent of where the tree is cloned.
  (cd "$moddir" && CGO_ENABLED=0 go build -trimpath -o "$dir/.$name.tmp" "$pkg")
  mv "$dir/.$name.tmp" "$dir/$name"
}

targets=("$@")
[[ ${#targets[@]} -gt 0 ]] || targets=(kube-apiserver etcd)
for t in "${targets[@]}"; do
  case "$t" in
    etcd) build etcd "$hack/etcd" . ;;
    kube-apiserver|kube-controller-manager|kube-scheduler|kubelet) build "$t" "$hack/k8s" "./$t" ;;
    *) echo "build-k8s: unknown binary \"$t\"; want one of kube-apiserver etcd kube-controller-manager kube-scheduler kubelet" >&2; exit 2 ;;
  esac
done
echo "$dir"
