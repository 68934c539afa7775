package server

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// serveWarm serves a daemon with envd and WarmCommand (writing a file named "warmed" in the
// root), locked or not, and returns it once its warm-up ended.
func serveWarm(t *testing.T, locked, envd bool) *Daemon {
	t.Helper()
	cfg := Config{RootDir: t.TempDir(), ShutdownTimeout: 5 * time.Second, Token: "sandbox-token", Environ: os.Environ(),
		WarmCommand: []string{"/bin/sh", "-c", "echo $PWD > warmed"}}
	if locked {
		cfg.ControlToken, cfg.RequireClaim = "control-token", true
	}
	d, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ls := Listeners{}
	if envd {
		if ls.Envd, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
	} else if ls.REST, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- d.Serve(ctx, ls) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("Serve returned %v", err)
		}
	})
	select {
	case <-d.warmed:
	case <-time.After(time.Minute):
		t.Fatal("the warm-up did not end")
	}
	return d
}

// A locked warm member with the envd port runs the warm-up command once before its claim, in the
// sandbox root; a claimed (unlocked) sandbox, or one without envd, does not.
func TestWarmMemberRunsTheWarmCommand(t *testing.T) {
	for _, tt := range []struct {
		name         string
		locked, envd bool
		want         bool
	}{
		{name: "locked member with envd", locked: true, envd: true, want: true},
		{name: "unlocked sandbox", locked: false, envd: true},
		{name: "locked member without envd", locked: true, envd: false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d := serveWarm(t, tt.locked, tt.envd)
			b, err := os.ReadFile(filepath.Join(d.Root(), "warmed"))
			if ran := err == nil; ran != tt.want {
				t.Fatalf("warm-up ran: %v (%v), want %v", ran, err, tt.want)
			}
			if tt.want && string(b) != d.Root()+"\n" {
				t.Errorf("warm-up ran in %q, want the sandbox root %q", b, d.Root())
			}
		})
	}
}
