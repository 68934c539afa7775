#!/usr/bin/env bash
# build-dev-tools.sh [TOOL...] builds the non-Kubernetes binaries of the local dev cluster into a
# cache keyed by tool version, and prints the directory that holds them. Tools: kwok coredns
# kube-router.
#
# Like build-k8s.sh the cache lives outside the work tree (PADDOCK_CACHE_DIR, default
# ~/.cache/paddock). KWOK's stage files ship inside its Go module; they are copied next to the
# binary (kwok-stages/) so that `paddock dev up` needs nothing from the module cache at run time.
# kube-router (whose network policy controller enforces NetworkPolicy on the real node) is
# installed as kube-router-VERSION, so that a version bump builds it anew.
set -euo pipefail

cache=${PADDOCK_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/paddock}
kwok_version=v0.8.0
coredns_version=v1.14.7
kube_router_version=v2.1.0
go_version=$(go env GOVERSION)
dir="$cache/bin/devtools-kwok-${kwok_version}-coredns-${coredns_version}-${go_version}"
mkdir -p "$dir"

install() { # install NAME PACKAGE@VERSION [INSTALLED_NAME]
  local name=$1 pkg=$2 as=${3:-$1} tmp
  if [[ -x "$dir/$as" ]]; then
    return
  fi
  echo "build-dev-tools: building $as ($pkg) into $dir" >&2
  tmp=$(mktemp -d)
  # GOBIN into a scratch dir, then an atomic rename: an interrupted build leaves no half binary.
  GOBIN="$tmp" CGO_ENABLED=0 go install -trimpath "$pkg"
  mv "$tmp/$name" "$dir/$as"
  rmdir "$tmp"
}

kwok_stages() {
  if [[ -d "$dir/kwok-stages" ]]; then
    return
  fi
  local moddir tmp
  moddir=$(GOFLAGS=-mod=mod go mod download -json "sigs.k8s.io/kwok@$kwok_version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  tmp=$(mktemp -d "$dir/.kwok-stages.XXXX")
  cp "$moddir"/kustomize/stage/node/fast/node-initialize.yaml "$moddir"/kustomize/stage/node/heartbeat/node-heartbeat.yaml \
    "$moddir"/kustomize/stage/pod/fast/pod-{ready,complete,delete}.yaml "$tmp/"
  chmod 0644 "$tmp"/*.yaml
  mv "$tmp" "$dir/kwok-stages"
}

targets=("$@")
[[ ${#targets[@]} -gt 0 ]] || targets=(kwok coredns kube-router)
for t in "${targets[@]}"; do
  case "$t" in
    kwok) install kwok "sigs.k8s.io/kwok/cmd/kwok@$kwok_version"; kwok_stages ;;
    coredns) install coredns "github.com/coredns/coredns@$coredns_version" ;;
    kube-router) install kube-router "github.com/cloudnativelabs/kube-router/v2/cmd/kube-router@$kube_router_version" "kube-router-$kube_router_version" ;;
    *) echo "build-dev-tools: unknown tool \"$t\"; want one of kwok coredns kube-router" >&2; exit 2 ;;
  esac
done
echo "$dir"
