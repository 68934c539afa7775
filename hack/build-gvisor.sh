#!/usr/bin/env bash
# build-gvisor.sh builds gVisor's runsc and its containerd shim (containerd-shim-runsc-v1) from the
# gvisor.dev/gvisor Go module into a cache and prints the directory that holds them.
#
# Every hack/gvisor/*.patch is applied to the module's source before both builds:
# - gvisor-shim-containerd16.patch: the shim runs under the Debian containerd 1.6 of the dev node
#   (it tolerates a host that withholds CAP_SYS_RESOURCE and prints the bare socket address that
#   containerd 1.6 expects).
# - gvisor-shim-paddock-restore.patch: the shim restores a container from a node-local memory
#   checkpoint named by the Pod's restore-from annotation (docs/design/snapshots.md, "Memory").
# - gvisor-runsc-no-spec-environ.patch: runsc's Sentry no longer creates /proc/gvisor/spec_environ,
#   which showed every process in the sandbox its container's environment, sandboxd's tokens
#   included (docs/security.md, "gVisor"). A stock runsc has it; sandboxd then refuses to start.
# - gvisor-tar-stream-files.patch: `runsc tar rootfs-upper` streams each file in 1 MiB chunks and
#   stops when its reader goes (a sparse file used to be read whole into the Sentry's memory:
#   docs/design/snapshots.md).
# Both binaries are static (CGO_ENABLED=0): runsc re-executes itself in an empty chroot, where a
# dynamic binary cannot start.
#
# Like build-k8s.sh the cache lives outside the work tree (PADDOCK_CACHE_DIR, default
# ~/.cache/paddock), keyed by the gVisor version, the patches' hash and the Go version. A fresh
# machine builds once: about 5 minutes on 2 cores. Needs only go, git and the Go module proxy.
set -euo pipefail

hack=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache=${PADDOCK_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/paddock}
# The go branch's pseudo-version (what gvisor.dev/gvisor@latest resolved to). When changing it,
# check that every patch still applies and that the e2e gVisor tests pass.
gvisor_version=v0.0.0-20260905035102-160fafc42237

fail() { echo "build-gvisor: $*" >&2; exit 1; }

command -v go >/dev/null || fail "go is not on PATH; install Go (see go.mod for the version)"
command -v git >/dev/null || fail "git is not on PATH; it applies the patches: apt-get install git"
patches=("$hack"/gvisor/*.patch)
[[ -f ${patches[0]} ]] || fail "no patch under $hack/gvisor"
patch_hash=$(cat "${patches[@]}" | sha256sum | cut -c1-12)
go_version=$(go env GOVERSION)
dir="$cache/bin/gvisor-${gvisor_version}-patch-${patch_hash}-${go_version}"

if [[ -x "$dir/runsc" && -x "$dir/containerd-shim-runsc-v1" ]]; then
  echo "$dir"
  exit 0
fi
mkdir -p "$cache/bin"
echo "build-gvisor: building runsc and containerd-shim-runsc-v1 $gvisor_version into $dir (first build on this machine takes minutes)" >&2

work=$(mktemp -d "$cache/bin/.gvisor-build.XXXXXX")
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT

# Outside any module, so that only the module proxy and the checksum database decide what we get.
moddir=$(cd "$work" && GOFLAGS=-mod=mod go mod download -json "gvisor.dev/gvisor@$gvisor_version" |
  sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p') ||
  fail "downloading gvisor.dev/gvisor@$gvisor_version failed; check that the Go module proxy ($(go env GOPROXY)) is reachable"
[[ -n $moddir && -d $moddir ]] || fail "go mod download gave no source directory for gvisor.dev/gvisor@$gvisor_version"

# The module cache is read-only: patch a writable copy.
src="$work/src"
cp -r "$moddir" "$src"
chmod -R u+w "$src"
for p in "${patches[@]}"; do
  # The ceiling keeps git from finding an enclosing repository, so paths are relative to $src.
  if ! (cd "$src" && GIT_CEILING_DIRECTORIES="$work" git apply --check "$p" && GIT_CEILING_DIRECTORIES="$work" git apply "$p"); then
    fail "patch $p does not apply to gvisor.dev/gvisor@$gvisor_version; update it for this version"
  fi
done

out="$work/out"
mkdir -p "$out"
build() { # build OUTPUT PACKAGE
  # -mod=mod lets the build record sums that the module's go.sum lacks (the go branch's go.sum is
  # generated and occasionally incomplete); they are still checked against the checksum database.
  (cd "$src" && CGO_ENABLED=0 GOFLAGS="-mod=mod -buildvcs=false" go build -trimpath -ldflags=-s -o "$out/$1" "$2") ||
    fail "go build $2 failed (gvisor.dev/gvisor@$gvisor_version, $go_version)"
}
build runsc ./runsc
build containerd-shim-runsc-v1 ./shim
mkdir -p "$dir"
mv "$out/runsc" "$out/containerd-shim-runsc-v1" "$dir/"
echo "$dir"
