#!/usr/bin/env bash
# bench-compare.sh REV_A REV_B is `make bench-compare A=REV_A B=REV_B`: build paddock-controller
# at two git revisions, bring a fresh local cluster with KWOK nodes up under the machine-wide
# cluster lock, push both as images to its registry, and let `paddock-bench --compare` run every
# scenario with the controller Deployment on A, then on B. The cluster's CRDs, RBAC and Deployment
# come from the working tree; only the controller binary differs. The cluster is taken down
# whatever happens. The comparison is in $BENCH_OUT/compare.md, each run's report in a/ and b/.
#
# Environment: BENCH_OUT (default bin/bench/compare-<UTC time>), BENCH_ARGS (scenario flags,
# default the standard warm and cold scenarios), BENCH_EXTRA_ARGS, BENCH_KWOK_NODES (default 10),
# BENCH_STATE_DIR (default /var/lib/paddock-bench).
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"

LOCK=/tmp/paddock-cluster.lock
REGISTRY=127.0.0.1:5001 # the dev cluster's registry (internal/devcluster's default port)
STATE_DIR=${BENCH_STATE_DIR:-/var/lib/paddock-bench}
KWOK_NODES=${BENCH_KWOK_NODES:-10}
OUT=${BENCH_OUT:-bin/bench/compare-$(date -u +%Y%m%dT%H%M%SZ)}
ARGS=${BENCH_ARGS:-"--kwok --pool 320 --count 300 --rate 20,50,burst --cold 500 --timeout 3m --refill-window 60s"}
export BENCH_OUT=$OUT BENCH_STATE_DIR=$STATE_DIR BENCH_KWOK_NODES=$KWOK_NODES BENCH_ARGS=$ARGS

run_locked() {
  local sha_a=$1 sha_b=$2
  trap 'echo "bench-compare: taking the cluster down"; bin/paddock dev down --state-dir "$STATE_DIR" || echo "bench-compare: dev down failed; run: bin/paddock dev down --state-dir $STATE_DIR" >&2' EXIT
  bin/paddock dev up --state-dir "$STATE_DIR" --kwok-nodes "$KWOK_NODES"
  for sha in "$sha_a" "$sha_b"; do
    bin/push-image --binary "bin/bench/controller-$sha" --ref "$REGISTRY/paddock/controller:bench-$sha"
  done
  local note="make bench-compare: local cluster (paddock dev up), 1 real node + $KWOK_NODES KWOK nodes, etcd fsync off, controller as a pod on the real node; $(nproc) CPUs"
  # shellcheck disable=SC2086 # ARGS is a list of flags
  bin/paddock-bench --kubeconfig "$STATE_DIR/kubeconfig" $ARGS --out "$OUT" --note "$note" \
    --compare "$REGISTRY/paddock/controller:bench-$sha_a,$REGISTRY/paddock/controller:bench-$sha_b" ${BENCH_EXTRA_ARGS:-}
}

if [[ ${1:-} == --locked ]]; then
  run_locked "$2" "$3"
  exit
fi
if [[ $# -ne 2 ]]; then
  echo "usage: $0 REV_A REV_B   (git revisions, e.g. main HEAD)" >&2
  exit 2
fi

commit=$(git rev-parse --short HEAD)
go build -ldflags "-X github.com/paddock-dev/paddock/internal/version.gitCommit=$commit" -o bin/ ./cmd/paddock ./cmd/paddock-bench
go build -o bin/push-image ./hack/push-image
make --no-print-directory e2e-deps
mkdir -p bin/bench
shas=()
for rev in "$1" "$2"; do
  sha=$(git rev-parse --short "$rev^{commit}")
  src=$(mktemp -d)
  # An exported tree, not a worktree: nothing in the repository changes.
  git archive "$sha" | tar -x -C "$src"
  echo "bench-compare: building paddock-controller at $rev ($sha)"
  (cd "$src" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X github.com/paddock-dev/paddock/internal/version.gitCommit=$sha" \
    -o "$OLDPWD/bin/bench/controller-$sha" ./cmd/paddock-controller)
  rm -rf "$src"
  shas+=("$sha")
done
echo "bench-compare: waiting for the cluster lock $LOCK"
flock "$LOCK" "$0" --locked "${shas[@]}"
echo "bench-compare: comparison in $OUT/compare.md"
