#!/bin/bash
# Usage (root, on the node of a running `paddock dev up` cluster): hack/bench-warm/run.sh OUT
#
# The issue 30 benchmark table in one command: every row in sequence, each row's raw JSON and
# log in OUT, then OUT/table.md. The rows (scale through the environment, defaults fit one
# 25-minute hold of the cluster lock on the 2-core dev node):
#   a  A_RATE creates/s for A_SECONDS s against a pool filled for the stream first, per runtime
#   b  members started per second from an empty pool of B_FILL until all Ready, per runtime,
#      then a B_SECONDS stream at about that rate against a pool of B_FILL: share served warm
#      after the first 10 s; each sandbox is killed once its command ran (an agent that is done),
#      so the stream holds only the sandboxes in flight, not more than the node's 110 Pods
#   c  C_RATE creates/s for C_SECONDS s against dev up's own `base` pool, as a user hits it
#   d  D_MEMBERS idle gVisor members: PSS/RSS and CPU read on the node, as dev up ships `base`
#      (no requests) and with requests and the pool's idle requests
#   e  API writes per warm claim, the pool's refill included (paddock-bench's warm scenario)
# Rows a, b and c also report where the node's CPU went per create, by component
# (paddock-bench --e2b-node-cpu: the script runs on the node).
# ROWS picks rows (default "e a b d c": c, which leaves dev up's pool refilling, last), RUNTIMES
# the runtimes of a and b (default "gvisor runc"). Before each row, and before the creates of a, b
# and c once their pool is full, the run waits (at most SETTLE_SECONDS, default 240) for the
# previous row's namespaces to go and the 1-minute load average to fall to SETTLE_LOAD (default
# 4); each row records the load it started at.
# DEADLINE (a date, default 40 minutes from now): no row starts after it and every harness run
# is cut there, so the run fits in a hold of the cluster lock.
# It deletes what it makes (namespaces bench-warm-*, templates default/bench-warm-*), even when
# a row fails or the script is interrupted.
set -u
OUT=${1:?usage: hack/bench-warm/run.sh OUT}
cd "$(dirname "$0")/../.."
export KUBECONFIG=${KUBECONFIG:-/var/lib/paddock-dev/kubeconfig}
A_RATE=${A_RATE:-20} A_SECONDS=${A_SECONDS:-5}
B_FILL=${B_FILL:-20} B_SECONDS=${B_SECONDS:-60}
C_RATE=${C_RATE:-5} C_SECONDS=${C_SECONDS:-20}
D_MEMBERS=${D_MEMBERS:-50} D_WINDOW=${D_WINDOW:-30}
D_CPU=${D_CPU:-250m} D_MEMORY=${D_MEMORY:-256Mi} D_IDLE_CPU=${D_IDLE_CPU:-10m} D_IDLE_MEMORY=${D_IDLE_MEMORY:-32Mi}
E_CLAIMS=${E_CLAIMS:-10} E_POOL=${E_POOL:-5} E_IMAGE=${E_IMAGE:-127.0.0.1:5001/pause:dev}
ROWS=${ROWS:-e a b d c}
SETTLE_LOAD=${SETTLE_LOAD:-4} SETTLE_SECONDS=${SETTLE_SECONDS:-240} RUNTIMES=${RUNTIMES:-gvisor runc}
TIMEOUT=${TIMEOUT:-6m}
DEADLINE=$(date -u -d "${DEADLINE:-+40 minutes}" +%s) || exit 1
mkdir -p "$OUT" || exit 1
OUT=$(cd "$OUT" && pwd)
ROWSFILE=$OUT/rows.jsonl
: >"$ROWSFILE"
K=kubectl
command -v kubectl >/dev/null || K="go run ./cmd/paddock kubectl --"
log() { echo "$(date -u +%T) $*" | tee -a "$OUT/run.log"; }
load1() { cut -d' ' -f1 /proc/loadavg; }
left() { echo $((DEADLINE - $(date -u +%s))); }
# upto SECONDS: SECONDS, or what is left until the deadline if less (at least 1).
upto() { local l; l=$(left); [ "$l" -lt "$1" ] || l=$1; [ "$l" -gt 0 ] || l=1; echo "$l"; }
# bounded SECONDS CMD...: CMD, cut at SECONDS or at the deadline, whichever comes first.
bounded() {
  local s=$1
  shift
  [ "$(left)" -lt "$s" ] && s=$(left)
  [ "$s" -gt 0 ] || return 124
  timeout "$s" "$@"
}

cleanup() {
  for ns in $($K get ns -o name 2>/dev/null | sed -n 's|^namespace/\(bench-warm-.*\)|\1|p'); do
    $K delete ns "$ns" --wait=false >/dev/null 2>&1
  done
  $K -n default delete sandboxtemplate bench-warm-gvisor bench-warm-runc --ignore-not-found >/dev/null 2>&1
}
trap cleanup EXIT
trap 'exit 1' INT TERM

go build -o "$OUT/paddock-bench" ./cmd/paddock-bench || exit 1
BENCH=$OUT/paddock-bench
log "start $(uptime) commit $(git rev-parse --short HEAD)"

# The runtimes' templates: dev up's `base` as it is (gVisor), and the same without its
# RuntimeClass (runc). The harness copies them without their volumes.
$K -n default get sandboxtemplate base -o json >"$OUT/base-template.json" || exit 1
template() { # NAME RUNTIME
  jq --arg n "$1" --arg rt "$2" '
    del(.metadata.resourceVersion, .metadata.uid, .metadata.creationTimestamp, .metadata.generation, .metadata.managedFields, .metadata.labels, .status)
    | .metadata.name = $n
    | (if $rt == "runc" then del(.spec.podTemplate.spec.runtimeClassName) else . end)' "$OUT/base-template.json" | $K apply -f - >/dev/null
}
template bench-warm-gvisor gvisor && template bench-warm-runc runc || exit 1

# row NAME RUNTIME JSON: one line of rows.jsonl.
row() { jq -c --arg row "$1" --arg rt "$2" '. + {row: $row, runtime: $rt}' <<<"$3" >>"$ROWSFILE"; }

# e2bRow NAME RUNTIME DIR TARGET: a row from a paddock-bench --e2b report.
e2bRow() {
  local f=$3/report.json
  [ -s "$f" ] && jq -e '.scenarios[0]' "$f" >/dev/null 2>&1 || { row "$1" "$2" '{"error":"no report; see the row log"}'; return; }
  row "$1" "$2" "$(jq -c --arg target "$4" '.scenarios[0] as $s | {
      count: $s.count, created: $s.e2b.created, warm: $s.e2b.warm, rate: $s.rate,
      pool: (if $s.name | test("pool of ") then null else $s.poolSize end),
      create: $s.e2b.create, first: $s.e2b.firstInstruction, writesPerClaim: $s.writesPerObject,
      loadStart: ($s.e2b.loadAtCreates // "" | split(" ")[0]), loadEnd: ($s.loadAverage // "" | split(" ")[0]),
      warmAfter10: ([$s.samples[] | select(.startSeconds >= 10)] | if length == 0 then null else ((map(select(.warm)) | length) / length) end),
      problems: $s.e2b.problems, target: $target,
      cpuPerCreate: ($s.e2b.nodeCPU // null | if . == null then null else {busy: (.busyCoreSeconds / $s.count), components: (.components | map_values(. / $s.count))} end)}' "$f")"
}

# poolReady NS NAME WANT DEADLINE_S: poll until the pool has WANT Ready members; echo seconds waited.
poolReady() {
  local t0 now ready
  t0=$(date +%s.%N)
  while :; do
    ready=$($K -n "$1" get sandboxwarmpool "$2" -o jsonpath='{.status.readyReplicas}' 2>/dev/null)
    now=$(date +%s.%N)
    if [ "${ready:-0}" -ge "$3" ]; then echo "$now - $t0" | bc; return 0; fi
    if [ "$(echo "$now - $t0 > $4" | bc)" = 1 ]; then echo "$now - $t0" | bc; return 1; fi
    sleep 0.5
  done
}

# memberNamespace NS RUNTIME [RESOURCES_JSON]: a namespace with a template copy (volumes dropped,
# as the harness does) named bench-warm, its first container with those resources.
memberNamespace() {
  $K create ns "$1" >/dev/null || return 1
  jq --arg ns "$1" --argjson res "${3:-null}" '
    .metadata.namespace = $ns | .metadata.name = "bench-warm" | del(.spec.volumeClaimTemplates)
    | .spec.podTemplate.spec.containers[0] |= (del(.volumeMounts) | if $res == null then . else .resources = $res end)' \
    <($K -n default get sandboxtemplate "bench-warm-$2" -o json) | $K apply -f - >/dev/null
}
pool() { # NS REPLICAS [ANNOTATIONS_JSON]
  local a=${3:-}
  [ -n "$a" ] || a='{}'
  jq -n --arg ns "$1" --argjson r "$2" --argjson a "$a" '{apiVersion: "extensions.agents.x-k8s.io/v1beta1", kind: "SandboxWarmPool",
    metadata: {name: "bench-warm", namespace: $ns, annotations: $a}, spec: {replicas: $r, sandboxTemplateRef: {name: "bench-warm"}}}' | $K apply -f - >/dev/null
}
# settle: wait (at most SETTLE_SECONDS, and not past the deadline) until no bench-warm namespace
# is left and the 1-minute load average is at most SETTLE_LOAD.
settle() {
  local until=$(($(date -u +%s) + $(upto "$SETTLE_SECONDS")))
  while [ "$(date -u +%s)" -lt "$until" ]; do
    if ! $K get ns -o name 2>/dev/null | grep -q '^namespace/bench-warm-' &&
      [ "$(echo "$(load1) <= $SETTLE_LOAD" | bc)" = 1 ]; then
      return 0
    fi
    sleep 5
  done
  log "settle: load $(load1) after ${SETTLE_SECONDS}s (wanted <= $SETTLE_LOAD); going on"
}
dropNamespace() { $K delete ns "$1" --timeout=5m >/dev/null 2>&1 || log "namespace $1 not gone within 5m"; }

rowA() {
  for rt in $RUNTIMES; do
    local n=$((A_RATE * A_SECONDS)) dir=$OUT/a-$rt
    log "row a $rt: $n creates at $A_RATE/s, pool $n filled first; load $(load1)"
    bounded 900 "$BENCH" --rate '' --e2b "$n" --e2b-rate "$A_RATE" --e2b-template "default/bench-warm-$rt" \
      --e2b-settle-load "$SETTLE_LOAD" --e2b-node-cpu --timeout "$TIMEOUT" --out "$dir" >"$OUT/a-$rt.log" 2>&1 || log "row a $rt: paddock-bench failed, see a-$rt.log"
    e2bRow a "$rt" "$dir" "$([ "$rt" = gvisor ] && echo 'first command p50 <= 40 ms, p99 <= 150 ms' || echo '(none for runc)')"
  done
}

rowB() {
  for rt in $RUNTIMES; do
    local ns=bench-warm-fill-$rt l0 secs rate
    log "row b $rt: fill of an empty pool of $B_FILL; load $(load1)"
    l0=$(load1)
    memberNamespace "$ns" "$rt" || { row b-fill "$rt" '{"error":"namespace"}'; continue; }
    pool "$ns" "$B_FILL"
    if secs=$(poolReady "$ns" bench-warm "$B_FILL" "$(upto 600)"); then
      rate=$(echo "scale=2; $B_FILL / $secs" | bc)
      row b-fill "$rt" "$(jq -nc --argjson n "$B_FILL" --argjson s "$secs" --argjson r "$rate" --arg l0 "$l0" --arg l1 "$(load1)" --argjson cores "$(nproc)" \
        '{members: $n, seconds: $s, perSecond: $r, perCore: ($r / $cores), loadStart: $l0, loadEnd: $l1}')"
    else
      row b-fill "$rt" "$(jq -nc --argjson n "$B_FILL" --argjson s "$secs" '{error: ("pool of \($n) not Ready in \($s) s")}')"
      rate=
    fi
    dropNamespace "$ns"
    [ -n "$rate" ] || continue
    # The stream at the refill rate (one decimal, down), against a pool as large as the fill.
    local r n dir=$OUT/b-$rt
    r=$(echo "scale=1; x = $rate / 1; if (x < 0.5) x = 0.5; x" | bc)
    n=$(echo "$r * $B_SECONDS / 1" | bc)
    log "row b $rt: $n creates at $r/s against a pool of $B_FILL; load $(load1)"
    bounded 900 "$BENCH" --rate '' --e2b "$n" --e2b-rate "$r" --e2b-pool "$B_FILL" --e2b-kill-after-command --e2b-template "default/bench-warm-$rt" \
      --e2b-settle-load "$SETTLE_LOAD" --e2b-node-cpu --timeout "$TIMEOUT" --out "$dir" >"$OUT/b-$rt.log" 2>&1 || log "row b $rt: paddock-bench failed, see b-$rt.log"
    e2bRow b-stream "$rt" "$dir" "100% warm after the first 10 s"
  done
}

rowC() {
  local n=$((C_RATE * C_SECONDS)) dir=$OUT/c
  local before secs
  secs=$(poolReady default base "$($K -n default get sandboxwarmpool base -o jsonpath='{.spec.replicas}')" "$(upto 300)") || log "row c: base pool not full after ${secs}s; measuring anyway"
  before=$($K -n default get sandboxwarmpool base -o jsonpath='{.spec.replicas}/{.status.readyReplicas}')
  log "row c: $n creates at $C_RATE/s against default/base (replicas/ready $before); load $(load1)"
  bounded 900 "$BENCH" --rate '' --e2b "$n" --e2b-rate "$C_RATE" --e2b-existing-pool --e2b-template default/base \
    --e2b-settle-load "$SETTLE_LOAD" --e2b-node-cpu --timeout "$TIMEOUT" --out "$dir" >"$OUT/c.log" 2>&1 || log "row c: paddock-bench failed, see c.log"
  $K -n default get events --field-selector involvedObject.name=base,reason=Autosized -o custom-columns=TIME:.lastTimestamp,MESSAGE:.message >"$OUT/c-autosized.txt" 2>&1
  log "row c: base pool replicas/ready after: $($K -n default get sandboxwarmpool base -o jsonpath='{.spec.replicas}/{.status.readyReplicas}')"
  e2bRow c gvisor "$dir" "(none; before issue 30: p50 32.5 s, p99 45.9 s)"
}

# memberProcs NS POD: the host processes of a gVisor Pod (runsc sandbox, gofers, and the shim).
memberProcs() {
  local sb
  pgrep -f "pod-logs/${1}_${2}_" | while read -r p; do
    echo "$p"
    [ "$(cat /proc/"$p"/comm 2>/dev/null)" = exe ] && grep -qa 'runsc-sandbox' /proc/"$p"/cmdline 2>/dev/null &&
      sb=$(tr '\0' '\n' </proc/"$p"/cmdline | tail -1) && pgrep -f "containerd-shim-runsc-v1 .*-id $sb"
  done | sort -u
}
ticks() { # PIDS...: utime+stime, in clock ticks
  local t=0 p s
  for p in "$@"; do
    s=$(sed 's/.*) //' /proc/"$p"/stat 2>/dev/null) || continue
    t=$((t + $(awk '{print $12 + $13}' <<<"$s")))
  done
  echo $t
}
rowD() {
  local variant
  for variant in shipped idle; do
    local ns=bench-warm-density-$variant l0 secs pids pss rss t0 t1 req
    l0=$(load1)
    log "row d $variant: $D_MEMBERS idle gVisor members; load $l0"
    if [ $variant = shipped ]; then
      memberNamespace "$ns" gvisor && pool "$ns" "$D_MEMBERS"
    else
      memberNamespace "$ns" gvisor "{\"requests\":{\"cpu\":\"$D_CPU\",\"memory\":\"$D_MEMORY\"}}" &&
        pool "$ns" "$D_MEMBERS" "{\"paddock.dev/idle-cpu\":\"$D_IDLE_CPU\",\"paddock.dev/idle-memory\":\"$D_IDLE_MEMORY\"}"
    fi
    if ! secs=$(poolReady "$ns" bench-warm "$D_MEMBERS" "$(upto 600)"); then
      row d "gvisor, $variant" "$(jq -nc --arg s "$secs" --arg r "$($K -n "$ns" get sandboxwarmpool bench-warm -o jsonpath='{.status.readyReplicas}')" \
        '{error: ("pool not Ready in \($s) s: \($r) Ready")}')"
      dropNamespace "$ns"; continue
    fi
    sleep 20 # the members' start-up work (warm command, probes) ends before the idle window
    pids=$(for pod in $($K -n "$ns" get pods -o jsonpath='{.items[*].metadata.name}'); do memberProcs "$ns" "$pod"; done | sort -u)
    # shellcheck disable=SC2086
    t0=$(ticks $pids); sleep "$D_WINDOW"; t1=$(ticks $pids)
    # shellcheck disable=SC2086
    pss=$(for p in $pids; do awk '/^Pss:/{print $2}' /proc/"$p"/smaps_rollup 2>/dev/null; done | paste -sd+ | bc)
    # shellcheck disable=SC2086
    rss=$(for p in $pids; do awk '/^Rss:/{print $2}' /proc/"$p"/smaps_rollup 2>/dev/null; done | paste -sd+ | bc)
    req=$($K -n "$ns" get pods -o json | jq -c '[.items[] | .spec.containers[0].resources.requests // {}] | {cpu: (map(.cpu // "0") | unique), memory: (map(.memory // "0") | unique)}')
    $K -n "$ns" get pods -o wide >"$OUT/d-$variant-pods.txt" 2>&1
    for p in $pids; do echo "$p $(cat /proc/"$p"/comm 2>/dev/null) $(grep -E '^(Rss|Pss):' /proc/"$p"/smaps_rollup 2>/dev/null | tr -s ' ' | tr '\n' ' ')"; done >"$OUT/d-$variant-procs.txt"
    row d "gvisor, $variant" "$(jq -nc --argjson n "$D_MEMBERS" --argjson pss "${pss:-0}" --argjson rss "${rss:-0}" --argjson procs "$(wc -w <<<"$pids")" \
      --argjson ticks "$((t1 - t0))" --argjson hz "$(getconf CLK_TCK)" --argjson w "$D_WINDOW" --argjson req "$req" --arg l0 "$l0" --arg l1 "$(load1)" --argjson fill "$secs" \
      '{members: $n, processes: $procs, fillSeconds: $fill, pssMiBPerMember: ($pss / 1024 / $n), rssMiBPerMember: ($rss / 1024 / $n),
        cpuMillicoresPerMember: ($ticks / $hz / $w * 1000 / $n), requests: $req, loadStart: $l0, loadEnd: $l1,
        target: "<= 32 MiB PSS per idle gVisor member"}')"
    dropNamespace "$ns"
  done
}

rowE() {
  local dir=$OUT/e l0
  l0=$(load1)
  log "row e: $E_CLAIMS warm claims at 2/s, pool $E_POOL of $E_IMAGE (runc), writes counted until the pool refilled; load $l0"
  bounded 600 "$BENCH" --rate 2 --count "$E_CLAIMS" --pool "$E_POOL" --image "$E_IMAGE" --refill-window 2m --timeout 3m \
    --out "$dir" >"$OUT/e.log" 2>&1 || log "row e: paddock-bench failed, see e.log"
  if [ -s "$dir/report.json" ] && jq -e '.scenarios[0]' "$dir/report.json" >/dev/null 2>&1; then
    row e runc "$(jq -c --arg l0 "$l0" --arg l1 "$(load1)" '.scenarios[0] as $s | {count: $s.count, ready: $s.ready, create: $s.latency,
      writesPerClaim: $s.writesPerObject, writes: $s.writes, refillComplete: $s.refillComplete, refillSeconds: $s.refillSeconds,
      loadStart: $l0, loadEnd: $l1, target: "<= 10 API writes per warm claim"}' "$dir/report.json")"
  else
    row e runc '{"error":"no report; see e.log"}'
  fi
}

for r in $ROWS; do
  if [ "$(left)" -le 0 ]; then
    log "row $r skipped: past the deadline"
    row "$r" - '{"error":"skipped: past the run'"'"'s deadline"}'
    continue
  fi
  settle
  case $r in
  a) rowA ;; b) rowB ;; c) rowC ;; d) rowD ;; e) rowE ;;
  *) log "unknown row $r (give a, b, c, d or e)" ;;
  esac
done
log "end $(uptime)"
hack/bench-warm/table.sh "$ROWSFILE" >"$OUT/table.md" && cat "$OUT/table.md"
