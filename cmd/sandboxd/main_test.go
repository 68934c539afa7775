package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paddock-dev/paddock/test/framework"
)

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// TestServeUntilCancelled runs the binary's wiring on loopback ports: health answers on the REST
// and legacy ports, and cancelling (what SIGTERM does) stops it cleanly.
func TestServeUntilCancelled(t *testing.T) {
	o, err := parse(t, nil, "--listen-host=127.0.0.1", "--root-dir="+t.TempDir(), "--allow-unauthenticated",
		fmt.Sprintf("--grpc-port=%d", freePort(t)), fmt.Sprintf("--rest-port=%d", freePort(t)), fmt.Sprintf("--legacy-port=%d", freePort(t)),
		"--envd-port=0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serve(ctx, *o, nil) }()
	for _, url := range []string{fmt.Sprintf("http://127.0.0.1:%d/v1/health", o.RESTPort), fmt.Sprintf("http://127.0.0.1:%d/", o.LegacyPort)} {
		framework.Eventually(t, func(context.Context) error {
			resp, err := http.Get(url)
			if err != nil {
				return err
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("GET %s = %d", url, resp.StatusCode)
			}
			return nil
		})
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("serve returned %v after cancel, want nil", err)
	}
}

func TestServeFailsOnAPortInUse(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	o, err := parse(t, nil, "--listen-host=127.0.0.1", "--root-dir="+t.TempDir(), "--legacy-port=0", "--envd-port=0", "--token=t",
		fmt.Sprintf("--grpc-port=%d", freePort(t)), fmt.Sprintf("--rest-port=%d", busy.Addr().(*net.TCPAddr).Port))
	if err != nil {
		t.Fatal(err)
	}
	if err := serve(context.Background(), *o, nil); err == nil {
		t.Fatal("serve succeeded with its REST port taken, want a bind error")
	}
}

// With a service, serve starts it once the ports are bound and stops it when cancelled (what
// SIGTERM does), before returning.
func TestServeStopsItsService(t *testing.T) {
	dir := t.TempDir()
	o, err := parse(t, nil, "--listen-host=127.0.0.1", "--root-dir="+t.TempDir(), "--allow-unauthenticated",
		fmt.Sprintf("--grpc-port=%d", freePort(t)), fmt.Sprintf("--rest-port=%d", freePort(t)), "--legacy-port=0", "--envd-port=0")
	if err != nil {
		t.Fatal(err)
	}
	o.Service = []string{"/bin/sh", "-c", `echo $$ > "$0/pid"; exec sleep 600`, dir} // what run takes from after the flags
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serve(ctx, *o, nil) }()
	var pid string
	framework.Eventually(t, func(context.Context) error {
		b, err := os.ReadFile(filepath.Join(dir, "pid"))
		if pid = strings.TrimSpace(string(b)); err != nil || pid == "" {
			return fmt.Errorf("the service has not started: %v", err)
		}
		return nil
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("serve returned %v after cancel, want nil", err)
	}
	if b, err := os.ReadFile("/proc/" + pid + "/stat"); err == nil && !strings.Contains(string(b), ") Z ") {
		t.Errorf("the service (pid %s) still runs after serve returned", pid)
	}
}
