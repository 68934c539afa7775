#!/bin/bash
# Usage (root): hack/bench-claimpath/run.sh ROOTFS RUNSC [COUNT]
# ROOTFS is an unpacked env-base root filesystem (its layer.tar.gz from ~/.cache/paddock/env);
# RUNSC the runsc binary paddock dev up built. For each variant, COUNT times: a fresh locked
# sandboxd in a network namespace of its own (198.18.250.0/30), under gVisor (runsc, systrap) or
# natively (chroot, as runc would run it), then bench-claimpath once against it. Prints one JSON
# line per run, prefixed by the variant. Removes the namespace and veth it adds, even on failure.
set -u
ROOTFS=$1 RUNSC=$2 COUNT=${3:-10}
HERE=$(cd "$(dirname "$0")" && pwd)
WORK=$(mktemp -d)
NS=gvp-claimpath IP=198.18.250.2
cleanup() {
  "$RUNSC" --root "$WORK/state" kill cp 9 >/dev/null 2>&1; "$RUNSC" --root "$WORK/state" delete -force cp >/dev/null 2>&1
  [ -n "${NATIVE:-}" ] && kill "$NATIVE" 2>/dev/null
  netdown
  grep -o " $WORK/[^ ]*" /proc/mounts | xargs -r -n1 umount 2>/dev/null; rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
# A fresh namespace per run: gVisor's netstack takes the interface's address over.
netup() {
  ip netns add $NS && ip link add gvp-cp-h type veth peer name gvp-cp-c && ip link set gvp-cp-c netns $NS &&
    ip addr add 198.18.250.1/30 dev gvp-cp-h && ip link set gvp-cp-h up &&
    ip netns exec $NS ip addr add $IP/30 dev gvp-cp-c && ip netns exec $NS ip link set gvp-cp-c up &&
    ip netns exec $NS ip link set lo up
}
netdown() { ip netns del $NS 2>/dev/null; ip link del gvp-cp-h 2>/dev/null; }
(cd "$HERE/../.." && go build -o "$WORK/claimpath" ./hack/bench-claimpath && CGO_ENABLED=0 go build -o "$ROOTFS/usr/local/bin/sandboxd" ./cmd/sandboxd) || exit 1
ENV='"SANDBOXD_TOKEN=sandbox-token","SANDBOXD_CONTROL_TOKEN=control-token","SANDBOXD_REQUIRE_CLAIM=true","HOME=/home/user","PATH=/usr/local/bin:/usr/bin:/bin"'
healthy() { for _ in $(seq 600); do curl -fs -o /dev/null http://$IP:49983/health && return 0; sleep 0.05; done; return 1; }
for variant in ${VARIANTS:-gvisor-before gvisor-after native-before native-after}; do
  args='"--root-dir=/home/user","--listen-host=0.0.0.0"'
  case $variant in *-before) args="$args"',"--claim-hold=0s","--warm-command="' ;; esac
  for i in $(seq "$COUNT"); do
    netup || exit 1
    case $variant in
    gvisor-*)
      mkdir -p "$WORK/bundle"
      cat > "$WORK/bundle/config.json" <<JSON
{"ociVersion":"1.0.0","process":{"user":{"uid":1000,"gid":1000},"args":["/usr/local/bin/sandboxd",$args],"env":[$ENV],"cwd":"/home/user"},
 "root":{"path":"$ROOTFS"},"hostname":"cp",
 "mounts":[{"destination":"/proc","type":"proc","source":"proc"},{"destination":"/tmp","type":"tmpfs","source":"tmpfs"}],
 "linux":{"namespaces":[{"type":"pid"},{"type":"ipc"},{"type":"uts"},{"type":"mount"},{"type":"network","path":"/var/run/netns/$NS"}]}}
JSON
      "$RUNSC" --root "$WORK/state" --platform=systrap run --detach --bundle "$WORK/bundle" cp >/dev/null 2>"$WORK/runsc.err" || { cat "$WORK/runsc.err"; exit 1; } ;;
    native-*)
      a=$(echo "$args" | tr -d '"' | tr ',' ' ')
      ip netns exec $NS chroot --userspec=1000:1000 "$ROOTFS" env -i SANDBOXD_TOKEN=sandbox-token SANDBOXD_CONTROL_TOKEN=control-token \
        SANDBOXD_REQUIRE_CLAIM=true HOME=/home/user PATH=/usr/local/bin:/usr/bin:/bin /usr/local/bin/sandboxd $a >"$WORK/native.log" 2>&1 &
      NATIVE=$! ;;
    esac
    healthy || { echo "$variant: sandboxd not healthy"; tail -3 "$WORK/native.log" 2>/dev/null; exit 1; }
    sleep 1 # a member waits for its claim; its warm-up command runs meanwhile
    echo "$variant $("$WORK/claimpath" --host $IP --token sandbox-token --control-token control-token)"
    case $variant in
    gvisor-*) "$RUNSC" --root "$WORK/state" kill cp 9 >/dev/null 2>&1; "$RUNSC" --root "$WORK/state" delete -force cp >/dev/null 2>&1 ;;
    native-*) kill "$NATIVE"; wait "$NATIVE" 2>/dev/null; NATIVE= ;;
    esac
    netdown
  done
done
