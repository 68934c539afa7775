package capture

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/paddock-dev/paddock/internal/snapshot/layer"
)

// standInRunsc writes an executable that records its arguments and prints the tar at tarPath,
// as `runsc tar rootfs-upper` prints one. The real runsc needs a gVisor sandbox (the local
// cluster's e2e runs it); this checks what the capture asks of it and does with its output.
func standInRunsc(t *testing.T, tarPath string, exit int) (bin, argsFile string) {
	t.Helper()
	dir := t.TempDir()
	argsFile = filepath.Join(dir, "args")
	bin = filepath.Join(dir, "runsc")
	// Like runsc: a status line on stdout, the tar to --file (the last-but-one argument).
	script := "#!/bin/sh\necho \"$@\" > " + argsFile + "\necho Serializing rootfs upper layer\nfor a; do case $a in --file=*) out=${a#--file=};; esac; done\ncat " + tarPath + " > $out\necho 'runsc says no' >&2\nexit " + string(rune('0'+exit)) + "\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin, argsFile
}

func overlayTar(t *testing.T, entries ...*tar.Header) string {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, h := range entries {
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Size > 0 {
			_, _ = tw.Write(bytes.Repeat([]byte("x"), int(h.Size)))
		}
	}
	_ = tw.Close()
	p := filepath.Join(t.TempDir(), "upper.tar")
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestRunscUpper: runsc is asked for the container's upper layer under the given root, its
// whiteouts become OCI whiteouts, and a failing runsc or a tar over the budget fails the capture.
func TestRunscUpper(t *testing.T) {
	in := overlayTar(t,
		&tar.Header{Name: "etc/", Typeflag: tar.TypeDir, Mode: 0o755},
		&tar.Header{Name: "etc/new", Typeflag: tar.TypeReg, Mode: 0o600, Size: 5},
		&tar.Header{Name: "etc/gone", Typeflag: tar.TypeChar, Devmajor: 0, Devminor: 0},
	)
	bin, argsFile := standInRunsc(t, in, 0)
	var out bytes.Buffer
	o := Options{ContainerID: "c1", Runsc: bin, RunscRoot: "/run/r/k8s.io", Layer: layer.Options{Limits: layer.DefaultLimits()}}
	if err := runscUpper(context.Background(), o, &out); err != nil {
		t.Fatalf("runscUpper: %v", err)
	}
	args, _ := os.ReadFile(argsFile)
	if got := strings.TrimSpace(string(args)); got != "--root=/run/r/k8s.io tar rootfs-upper --file=/proc/self/fd/3 c1" {
		t.Errorf("runsc arguments %q", got)
	}
	var names []string
	tr := tar.NewReader(&out)
	for {
		h, err := tr.Next()
		if err != nil {
			break
		}
		names = append(names, h.Name)
	}
	if strings.Join(names, " ") != "etc/ etc/new etc/.wh.gone" {
		t.Errorf("layer entries %v, want etc/, etc/new and the whiteout etc/.wh.gone", names)
	}

	bin, _ = standInRunsc(t, in, 1)
	if err := runscUpper(context.Background(), Options{ContainerID: "c1", Runsc: bin, Layer: o.Layer}, &out); err == nil || !strings.Contains(err.Error(), "runsc says no") {
		t.Errorf("a failing runsc: error %v, want its stderr", err)
	}
	big := overlayTar(t, &tar.Header{Name: "big", Typeflag: tar.TypeReg, Mode: 0o644, Size: 4096})
	bin, _ = standInRunsc(t, big, 0)
	o.Runsc, o.Layer.MaxBytes = bin, 1024
	if err := runscUpper(context.Background(), o, &out); err == nil || !strings.Contains(err.Error(), "past its limit") {
		t.Errorf("a tar over the budget: error %v, want the limit named", err)
	}
}

// TestResume: resuming a paused container resumes it; one that is not paused or is gone is
// left alone without an error; a state containerd cannot read or a refused resume is an error.
func TestResume(t *testing.T) {
	rt := &fakeRuntime{paused: true}
	if err := Resume(context.Background(), rt, "c1"); err != nil || rt.paused {
		t.Errorf("Resume of a paused container: %v, paused %v", err, rt.paused)
	}
	running := &fakeRuntime{}
	if err := Resume(context.Background(), running, "c1"); err != nil || len(running.calls) != 0 {
		t.Errorf("Resume of a running container: %v, calls %v; want nothing asked", err, running.calls)
	}
	gone := &fakeRuntime{stateErr: status.Error(codes.NotFound, "task c1 not found")}
	if err := Resume(context.Background(), gone, "c1"); err != nil {
		t.Errorf("Resume of a container that is gone: %v", err)
	}
	for _, rt := range []*fakeRuntime{{stateErr: errors.New("shim gone")}, {paused: true, resumeErr: errors.New("shim gone")}} {
		if err := Resume(context.Background(), rt, "c1"); err == nil || !strings.Contains(err.Error(), "shim gone") {
			t.Errorf("Resume with containerd failing: error %v, want it reported", err)
		}
	}
}

// TestRunscUpperRefusalClosesThePipe: when the capture refuses a file at its tar header (a
// sparse file of 100 GiB), it closes the pipe rather than reading the rest, so the writer of the
// tar (gVisor's sentry, which holds its filesystem's read lock while writing) gets EPIPE at its
// next write and stops. The stand-in writes the header and then 64 MiB of the file's zeros,
// recording whether that write failed; read to the end, it would succeed.
func TestRunscUpperRefusalClosesThePipe(t *testing.T) {
	var hdr bytes.Buffer
	tw := tar.NewWriter(&hdr)
	if err := tw.WriteHeader(&tar.Header{Name: "h/sparse", Typeflag: tar.TypeReg, Mode: 0o644, Size: 100 << 30}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	hdrPath, status, bin := filepath.Join(dir, "header"), filepath.Join(dir, "status"), filepath.Join(dir, "runsc")
	if err := os.WriteFile(hdrPath, hdr.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	script := "#!/bin/sh\nfor a; do case $a in --file=*) out=${a#--file=};; esac; done\nexec 4>$out\ncat " + hdrPath +
		" >&4\nhead -c 67108864 /dev/zero >&4 2>/dev/null\necho $? > " + status + "\nexit 1\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	o := Options{ContainerID: "c1", Runsc: bin, Layer: layer.Options{Limits: layer.DefaultLimits()}}
	err := runscUpper(context.Background(), o, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "/h/sparse: its 107374182400 bytes would take the layer past its limit") {
		t.Errorf("runscUpper of a 100 GiB file: error %v, want the file and the limit named", err)
	}
	got, err := os.ReadFile(status)
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(string(got)) == "0" {
		t.Errorf("the tar's writer wrote 64 MiB of a refused file without an error; want the pipe closed (EPIPE) after the header")
	}
}

// TestRunscUpperStopsWithContext: a capture whose context ends (its deadline, the controller
// giving up) stops reading at once, even while something still holds the tar's write end (the
// sentry, which runsc's exit does not stop): the stand-in leaves a child holding it, which marks
// a file when it ends 30 s later, and the capture must return before that mark.
func TestRunscUpperStopsWithContext(t *testing.T) {
	var hdr bytes.Buffer
	tw := tar.NewWriter(&hdr)
	if err := tw.WriteHeader(&tar.Header{Name: "f", Typeflag: tar.TypeReg, Mode: 0o644, Size: 1 << 20}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	hdrPath, started, ended, bin := filepath.Join(dir, "header"), filepath.Join(dir, "started"), filepath.Join(dir, "ended"), filepath.Join(dir, "runsc")
	if err := os.WriteFile(hdrPath, hdr.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	script := "#!/bin/sh\nfor a; do case $a in --file=*) out=${a#--file=};; esac; done\nexec 4>$out\ncat " + hdrPath +
		" >&4\n(sleep 30; touch " + ended + ") </dev/null >/dev/null 2>&1 &\ntouch " + started + "\nwait\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { // cancel once the writer's child holds the pipe
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for range tick.C {
			if _, err := os.Stat(started); err == nil || ctx.Err() != nil {
				cancel()
				return
			}
		}
	}()
	o := Options{ContainerID: "c1", Runsc: bin, Layer: layer.Options{Limits: layer.DefaultLimits()}}
	if err := runscUpper(ctx, o, io.Discard); err == nil {
		t.Errorf("runscUpper with its context ended: no error")
	}
	if _, err := os.Stat(ended); err == nil {
		t.Errorf("runscUpper returned only after the tar's writer ended; want it to stop reading when its context ends")
	}
}
