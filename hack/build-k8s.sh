#!/usr/bin/env bash
# build-k8s.sh [BINARY...] builds Kubernetes and etcd binaries from their official Go modules into
# a cache keyed by module version, and prints the directory that holds them.
#
# The cache lives outside the work tree (PADDOCK_CACHE_DIR, default ~/.cache/paddock) so that
# clean clones on one machine share it; a fresh machine builds once (about 10 minutes on 2 cores
# for kube-apiserver). Binaries: kube-apiserver etcd kube-controller-manager kube-scheduler kubelet
# kubectl (the e2e tier runs it where upstream's clients do: `kubectl port-forward`).
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
# "-versioned": these binaries carry their version (below); the unversioned ones of earlier
# builds said v0.0.0-master+$Format:%H$.
dir="$cache/bin/k8s-${k8s_version}-etcd-${etcd_version}-${go_version}-versioned"
mkdir -p "$dir"

# The Kubernetes components report the version that their build stamps into component-base (and
# client-go, for what they send as User-Agent), as the Kubernetes release build does; unstamped
# they report v0.0.0-master+$Format:%H$ (kubectl get nodes, kubectl version, /version).
# The build date is fixed so that a rebuild yields the same binary.
k8s_ldflags() {
  local v=${k8s_version#v} flags="" pkg
  local major=${v%%.*} rest=${v#*.}
  local minor=${rest%%.*}
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    flags+=" -X $pkg.gitVersion=$k8s_version -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
    flags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
  done
  echo "$flags"
}

build() { # build NAME MODULE_DIR PACKAGE [LDFLAGS]
  local name=$1 moddir=$2 pkg=$3 ldflags=${4:-}
  if [[ -x "$dir/$name" ]]; then
    return
  fi
  # Several builds (make targets, tests, developers' worktrees) may ask for the same binary at
  # once: the first builds it under a lock, the others wait for it instead of racing on one file.
  exec {lock}>"$dir/.$name.lock"
  if ! flock -n "$lock"; then
    echo "build-k8s: waiting for another build of $name into $dir" >&2
    flock "$lock"
  fi
  if [[ ! -x "$dir/$name" ]]; then
    echo "build-k8s: building $name into $dir (first build on this machine takes minutes)" >&2
    # -trimpath and no VCS stamping keep the binary independent of where the tree is cloned.
    (cd "$moddir" && CGO_ENABLED=0 go build -trimpath -ldflags="$ldflags" -o "$dir/.$name.tmp" "$pkg")
    mv "$dir/.$name.tmp" "$dir/$name"
  fi
  exec {lock}>&-
}

targets=("$@")
[[ ${#targets[@]} -gt 0 ]] || targets=(kube-apiserver etcd)
for t in "${targets[@]}"; do
  case "$t" in
    etcd) build etcd "$hack/etcd" . ;;
    kube-apiserver|kube-controller-manager|kube-scheduler|kubelet|kubectl) build "$t" "$hack/k8s" "./$t" "$(k8s_ldflags)" ;;
    *) echo "build-k8s: unknown binary \"$t\"; want one of kube-apiserver etcd kube-controller-manager kube-scheduler kubelet kubectl" >&2; exit 2 ;;
  esac
done
echo "$dir"
