package main

import (
	"flag"
	"os"
	"strings"
	"testing"
)

func TestValidate(t *testing.T) {
	ok := []string{"--node-name=n", "--cluster-cidrs=198.18.0.0/24,198.18.1.0/24"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{ok, ""},
		{[]string{"--cleanup"}, ""},
		{[]string{"--cluster-cidrs=198.18.0.0/24"}, "--node-name is required"},
		{[]string{"--node-name=n"}, "--cluster-cidrs is required"},
		{append(ok[:1:1], "--cluster-cidrs=nope"), `--cluster-cidrs: cluster range 0: "nope"`},
		{append(ok, "--dns-port=15001"), "give them different ports"},
		{append(ok, "--proxy-port=70000"), "--proxy-port 70000"},
		{append(ok, "--upstream-dns=dns.example"), `--upstream-dns "dns.example": an ip:port`},
		{append(ok, "--ca-secret=justname"), `--ca-secret "justname": namespace/name`},
	} {
		o := defaultOptions()
		o.NodeName = ""
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		o.AddFlags(fs)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		err := o.Validate()
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%v: got %v, want %q", tc.args, err, tc.want)
		}
	}
}

func TestResolvConfNameserver(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ content, want string }{
		{"search x\nnameserver fd00::1\nnameserver 198.19.0.53\nnameserver 198.19.0.54\n", "198.19.0.53:53"},
		{"search x\n", ""},
	} {
		p := dir + "/resolv.conf"
		if err := os.WriteFile(p, []byte(tc.content), 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := resolvConfNameserver(p)
		if got != tc.want || (tc.want == "") != (err != nil) {
			t.Errorf("%q: got %q %v, want %q", tc.content, got, err, tc.want)
		}
	}
}
