package devcluster

import (
	"context"
	"net"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestValidate(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*Config)
		want   []string // substrings of the error; none means valid
	}{
		{name: "defaults", mutate: func(*Config) {}},
		{name: "relative state dir", mutate: func(c *Config) { c.StateDir = "state" }, want: []string{"--state-dir", "absolute"}},
		{name: "root state dir", mutate: func(c *Config) { c.StateDir = "/" }, want: []string{"--state-dir must not be /"}},
		{name: "negative kwok nodes", mutate: func(c *Config) { c.KWOKNodes = -1 }, want: []string{"--kwok-nodes -1"}},
		{name: "hundred kwok nodes", mutate: func(c *Config) { c.KWOKNodes = 100 }},
		{name: "thousand pods per kwok node", mutate: func(c *Config) { c.KWOKNodes, c.KWOKMaxPods = 10, 1000 }},
		{name: "zero pods per kwok node", mutate: func(c *Config) { c.KWOKMaxPods = 0 }, want: []string{"--kwok-max-pods 0 is out of range; want 1 to 10000"}},
		{name: "too many pods per kwok node", mutate: func(c *Config) { c.KWOKMaxPods = 10001 }, want: []string{"--kwok-max-pods 10001"}},
		{name: "kwok pods beyond the kwok range", mutate: func(c *Config) {
			c.KWOKNodes, c.KWOKMaxPods, c.KWOKCIDR = 3, 100, netip.MustParsePrefix("198.19.0.0/24")
		}, want: []string{"--kwok-nodes 3 × --kwok-max-pods 100 = 300 Pods do not fit the KWOK CIDR 198.19.0.0/24"}},
		{name: "pod range outside the test bed", mutate: func(c *Config) { c.PodCIDR = netip.MustParsePrefix("10.244.0.0/16") }, want: []string{"pod CIDR 10.244.0.0/16", "198.18.0.0/15"}},
		{name: "service range in 172.16/12", mutate: func(c *Config) { c.ServiceCIDR = netip.MustParsePrefix("172.20.0.0/16") }, want: []string{"service CIDR 172.20.0.0/16"}},
		{name: "overlapping ranges", mutate: func(c *Config) { c.KWOKCIDR = netip.MustParsePrefix("198.19.128.0/24") }, want: []string{"KWOK CIDR 198.19.128.0/24 overlaps service CIDR"}},
		{name: "stand-in range overlapping the KWOK range", mutate: func(c *Config) { c.InternetCIDR = netip.MustParsePrefix("198.19.1.0/24") }, want: []string{"internet stand-in CIDR 198.19.1.0/24 overlaps KWOK CIDR"}},
		{name: "stand-in range outside the test bed", mutate: func(c *Config) { c.InternetCIDR = netip.MustParsePrefix("8.8.8.0/24") }, want: []string{"internet stand-in CIDR 8.8.8.0/24 must be an IPv4 range inside 198.18.0.0/15"}},
		{name: "stand-in range too small", mutate: func(c *Config) { c.InternetCIDR = netip.MustParsePrefix("198.19.64.0/27") }, want: []string{"internet stand-in CIDR 198.19.64.0/27 is too small"}},
		{name: "node IP in 192.168/16", mutate: func(c *Config) { c.NodeIP = netip.MustParseAddr("192.168.1.1") }, want: []string{"node IP 192.168.1.1"}},
		{name: "node IP inside pod range", mutate: func(c *Config) { c.NodeIP = netip.MustParseAddr("198.18.0.7") }, want: []string{"pod CIDR 198.18.0.0/24 must not contain the node IP"}},
		{name: "duplicate port", mutate: func(c *Config) { c.Ports.Registry = c.Ports.EtcdClient }, want: []string{"registry port 23790 is also the etcd client port"}},
		{name: "port out of range", mutate: func(c *Config) { c.Ports.KWOK = 70000 }, want: []string{"kwok port 70000 is out of range"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := Defaults("/var/lib/paddock-dev")
			tc.mutate(&c)
			err := c.Validate()
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate() = nil, want an error with %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate() = %q, want it to contain %q", err, w)
				}
			}
		})
	}
}

func TestPortInUseNamesTheAddress(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	addr := l.Addr().String()
	err = portInUse(addr, false)
	if err == nil || !strings.Contains(err.Error(), "TCP "+addr+" is in use") {
		t.Fatalf("portInUse(%s) = %v, want an error naming the address", addr, err)
	}
	l.Close()
	if err := portInUse(addr, true); err != nil {
		t.Fatalf("portInUse(%s) after close = %v, want nil", addr, err)
	}
}

func TestInstallCommand(t *testing.T) {
	got := installCommand([]string{"containerd", "runc"})
	if want := "apt-get update && apt-get install -y containerd runc"; got != want {
		t.Fatalf("installCommand = %q, want %q", got, want)
	}
}

func TestHostOwnership(t *testing.T) {
	ownerFile = filepath.Join(t.TempDir(), "owner")
	a, b := Defaults(t.TempDir()), Defaults(t.TempDir())
	if !ownsHost(a) {
		t.Fatal("nobody owns the host, yet a does not count as its owner")
	}
	if err := claimHost(a); err != nil {
		t.Fatal(err)
	}
	if ownsHost(b) {
		t.Fatal("b owns the host a claimed")
	}
	// a runs nothing, so b may take over.
	if err := claimHost(b); err != nil {
		t.Fatalf("claim over a stopped cluster: %v", err)
	}
	// Now b runs a component: a may not take the host back.
	pid, err := b.process(compEtcd).start("/bin/sleep", []string{"60"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.process(compEtcd).stop(context.Background(), time.Second) })
	_ = pid
	if err := claimHost(a); err == nil || !strings.Contains(err.Error(), "paddock dev down --state-dir "+b.StateDir) {
		t.Fatalf("claim over a running cluster = %v, want an error telling how to stop it", err)
	}
	if err := releaseHost(a); err != nil {
		t.Fatal(err)
	}
	if !ownsHost(b) {
		t.Fatal("releaseHost(a) released b's claim")
	}
	if err := releaseHost(b); err != nil || !ownsHost(a) {
		t.Fatalf("releaseHost(b) = %v; the host should be free", err)
	}
}
