#!/bin/bash
# Run under: flock /tmp/paddock-cluster.lock hack/bench-claimpath/cluster.sh
# Not yet run end to end (2026-12-02: the cluster lock was busy past the session's stop).
# dev up from this checkout, four templates (gVisor/runc x before/after knobs),
# paddock-bench --e2b at 1/s for each, then dev down (always).
set -u
cd "$(dirname "$0")/../.."
STATE=/var/lib/paddock-gvp
KC=$STATE/kubeconfig
OUT=${OUT_DIR:-bin/bench}/claimpath-$(date -u +%H%M%S)
COUNT=${COUNT:-12}
mkdir -p "$OUT"
export PADDOCK_HELM=$PWD/bin/tools/helm PADDOCK_KUSTOMIZE=$PWD/bin/tools/kustomize
down() { go run ./cmd/paddock dev down --state-dir $STATE >"$OUT/down.log" 2>&1; echo "dev down rc=$?" | tee -a "$OUT/log"; }
trap down EXIT
echo "start $(date -u +%T) $(uptime)" | tee -a "$OUT/log"
# END (UTC, default 1 hour from now): start nothing that cannot end, with dev down, by then.
END=$(date -u -d "${END:-+1 hour}" +%s)
left() { echo $(( END - $(date -u +%s) )); }
if [ "$(left)" -lt 1200 ]; then echo "lock came too late ($(date -u +%T)); not starting" | tee -a "$OUT/log"; trap - EXIT; exit 0; fi
go build -o bin/paddock-bench ./cmd/paddock-bench || exit 1
if ! go run ./cmd/paddock dev up --state-dir $STATE --kwok-nodes 0 >"$OUT/up.log" 2>&1; then
  echo "dev up failed; see $OUT/up.log" | tee -a "$OUT/log"; exit 1
fi
echo "up $(date -u +%T) $(uptime)" | tee -a "$OUT/log"
K="kubectl --kubeconfig $KC"
# Keep the refill of claimed members out of the measured window, as earlier runs did.
$K -n paddock-system patch deployment paddock-controller --type json \
  -p '[{"op":"add","path":"/spec/template/spec/containers/0/args/-","value":"--sandbox-warm-pool-replenish-delay=60s"}]'
$K -n paddock-system rollout status deployment paddock-controller --timeout 5m
$K -n default get sandboxtemplate base -o json > "$OUT/base.json"
mk() { # name runtime(gvisor|runc) knobs(after|before)
  jq --arg n "$1" --arg rt "$2" --arg k "$3" '
    del(.metadata.resourceVersion, .metadata.uid, .metadata.creationTimestamp, .metadata.generation, .metadata.managedFields, .status, .metadata.labels)
    | .metadata.name = $n
    | (if $rt == "runc" then del(.spec.podTemplate.spec.runtimeClassName) else . end)
    | (if $k == "before" then .spec.podTemplate.spec.containers[0].args += ["--claim-hold=0s", "--warm-command="] else . end)' \
    "$OUT/base.json" | $K apply -f -
}
mk gv-after gvisor after; mk gv-before gvisor before; mk runc-after runc after; mk runc-before runc before
for t in ${ORDER:-gv-before gv-after runc-before runc-after gv-before gv-after}; do
  if [ "$(left)" -lt 420 ]; then echo "skip $t: $(left)s left" | tee -a "$OUT/log"; continue; fi
  echo "bench $t $(date -u +%T) $(uptime)" | tee -a "$OUT/log"
  timeout $(( $(left) - 120 )) bin/paddock-bench --kubeconfig $KC --rate '' --e2b $COUNT --e2b-rate 1 --e2b-second-command \
    --e2b-template default/$t --timeout 5m --out "$OUT/$t-$(date -u +%H%M%S)" >"$OUT/$t.log" 2>&1
  echo "bench $t rc=$? $(date -u +%T) $(uptime)" | tee -a "$OUT/log"
done
# One sample of the settings round trip from the controller's and sandboxd's logs.
$K -n paddock-system logs deployment/paddock-controller --tail 2000 > "$OUT/controller.log" 2>&1
