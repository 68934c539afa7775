#!/usr/bin/env bash
# bench.sh is `make bench`: build what the benchmark needs, bring a fresh local cluster with KWOK
# nodes up under the machine-wide cluster lock, run the standard scenarios with paddock-bench, take
# the cluster down whatever happened, and publish the report into docs/performance/results.md.
#
# Environment (all optional):
#   BENCH_OUT         directory for report.json, report.md and the plots (default bin/bench/<UTC time>)
#   BENCH_DOC         document whose generated results section is rewritten; empty leaves docs alone
#                     (default docs/performance/results.md)
#   BENCH_ARGS        paddock-bench scenario flags, replacing the standard ones below
#   BENCH_EXTRA_ARGS  flags appended to them (e.g. --note="...")
#   BENCH_KWOK_NODES  KWOK fake nodes (default 10)
#   BENCH_KWOK_MAX_PODS  Pods each KWOK node holds (default 110); e.g. 1100 with the default
#                     10 nodes to hold 10,000 Sandboxes and the hold scenario's probe
#   BENCH_STATE_DIR   the cluster's state directory (default /var/lib/paddock-bench)
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"

LOCK=/tmp/paddock-cluster.lock
STATE_DIR=${BENCH_STATE_DIR:-/var/lib/paddock-bench}
KWOK_NODES=${BENCH_KWOK_NODES:-10}
KWOK_MAX_PODS=${BENCH_KWOK_MAX_PODS:-110}
OUT=${BENCH_OUT:-bin/bench/$(date -u +%Y%m%dT%H%M%SZ)}
DOC=${BENCH_DOC-docs/performance/results.md}
# The standard scenarios: the reference table of the performance guide, on KWOK nodes.
STANDARD_ARGS="--kwok --pool 320 --count 300 --rate 20,50,burst --cold 500 --runtime 2000 --runtime-load 50000 --hold 1000 --hold-timeout 10m --timeout 3m --refill-window 60s"
ARGS=${BENCH_ARGS:-$STANDARD_ARGS}
# The locked re-run of this script must see the same values.
export BENCH_OUT=$OUT BENCH_DOC=$DOC BENCH_STATE_DIR=$STATE_DIR BENCH_KWOK_NODES=$KWOK_NODES BENCH_KWOK_MAX_PODS=$KWOK_MAX_PODS BENCH_ARGS=$ARGS

# run_locked runs with the lock held: the cluster exists only inside it.
run_locked() {
  trap 'echo "bench: taking the cluster down"; bin/paddock dev down --state-dir "$STATE_DIR" || echo "bench: dev down failed; run: bin/paddock dev down --state-dir $STATE_DIR" >&2' EXIT
  bin/paddock dev up --state-dir "$STATE_DIR" --kwok-nodes "$KWOK_NODES" --kwok-max-pods "$KWOK_MAX_PODS"
  local note="make bench: local cluster (paddock dev up), 1 real node + $KWOK_NODES KWOK nodes of $KWOK_MAX_PODS Pods, etcd fsync off, controller as a pod on the real node; $(nproc) CPUs"
  # shellcheck disable=SC2086 # ARGS is a list of flags
  bin/paddock-bench --kubeconfig "$STATE_DIR/kubeconfig" $ARGS --out "$OUT" --note "$note" ${BENCH_EXTRA_ARGS:-}
}

if [[ ${1:-} == --locked ]]; then
  run_locked
  exit
fi

echo "bench: building the binaries and the cluster's dependencies (outside the lock)"
commit=$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . ':!docs' || echo -dirty)
go build -ldflags "-X github.com/paddock-dev/paddock/internal/version.gitCommit=$commit" -o bin/ ./cmd/paddock ./cmd/paddock-bench
make --no-print-directory e2e-deps
echo "bench: waiting for the cluster lock $LOCK"
flock "$LOCK" "$0" --locked
echo "bench: report in $OUT"
if [[ -n $DOC ]]; then
  bin/paddock-bench --from "$OUT" --doc "$DOC"
  echo "bench: rewrote the results section of $DOC and its plots in $(dirname "$DOC")/bench"
fi
