package devcluster

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"
)

// The dev node's paddock-egress denies every range of the cluster, resolves through the internet
// stand-in and verifies hosts against the stand-in's CA; the controller admits its ports.
func TestEgressComponentFitsTheCluster(t *testing.T) {
	c := Defaults("/var/lib/paddock-test")
	args := egressArgs(c)
	want := []string{
		"--cluster-cidrs=198.18.0.0/24,198.19.128.0/17,198.19.0.0/18,198.18.255.1/32",
		"--upstream-dns=" + c.InternetResolver().String() + ":53",
		"--ca-secret=" + EgressCASecret,
		"--node-name=" + NodeName,
		"--proxy-port=15001",
		"--dns-port=15053",
	}
	for _, w := range want {
		if !slices.Contains(args, w) {
			t.Errorf("paddock-egress args %v lack %s", args, w)
		}
	}
	for _, a := range args {
		if strings.HasPrefix(a, "--cluster-cidrs=") && strings.Contains(a, c.InternetCIDR.String()) {
			t.Errorf("%s denies the internet stand-in's range %s, the dev cluster's whole internet", a, c.InternetCIDR)
		}
	}
	if env := egressEnv(c); !slices.Equal(env, []string{"SSL_CERT_FILE=/var/lib/paddock-test/internet/ca.crt"}) {
		t.Errorf("paddock-egress env %v; want the stand-in CA as its roots", env)
	}
	if comp, ok := (&cluster{cfg: c}).components()[compEgress]; !ok || comp.binary != "/var/lib/paddock-test/bin/paddock-egress" {
		t.Errorf("the egress component %+v; want the binary built into the state dir", comp)
	}
}

// KillEgress kills the recorded paddock-egress at once, even one that ignores SIGTERM (a crash,
// not a stop), and refuses when none runs; StartEgress names the missing binary.
func TestKillEgressAndStartWithoutBinary(t *testing.T) {
	cfg := Defaults(t.TempDir())
	if _, err := KillEgress(t.Context(), cfg); err == nil || !strings.Contains(err.Error(), "is not running") {
		t.Fatalf("KillEgress with nothing running = %v; want an error saying so", err)
	}
	p := cfg.process(compEgress)
	pid, err := p.start("/bin/sh", []string{"-c", "trap '' TERM; exec sleep 600"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.stop(context.Background(), time.Second) })
	if got := EgressPID(cfg); got != pid {
		t.Fatalf("EgressPID = %d, want %d", got, pid)
	}
	if cpu, err := EgressCPU(cfg); err != nil || cpu < 0 {
		t.Fatalf("EgressCPU = %v, %v; want the process's CPU time", cpu, err)
	}
	killed, err := KillEgress(t.Context(), cfg)
	if err != nil || killed != pid {
		t.Fatalf("KillEgress = %d, %v; want %d", killed, err, pid)
	}
	if EgressPID(cfg) != 0 {
		t.Fatal("paddock-egress still runs after KillEgress returned")
	}
	if _, err := EgressCPU(cfg); err == nil {
		t.Fatal("EgressCPU of no process succeeded")
	}
	if _, err := StartEgress(t.Context(), cfg); err == nil || !strings.Contains(err.Error(), "bin/paddock-egress does not exist; run paddock dev up first") {
		t.Fatalf("StartEgress without the binary = %v; want an error naming it", err)
	}
}
