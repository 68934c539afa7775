// Package sandboximage runs the default sandbox image's file tree the way upstream's sandboxd
// manifest runs it: as uid 1000, without any volume. The tree is extracted and sandboxd started
// chrooted into it (no container engine needed); it must come up, and E2B's /bin/bash -l -c
// commands must run as that user with a writable /workspace.
package sandboximage

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"

	pb "github.com/paddock-dev/paddock/api/proto/envd/process"
	"github.com/paddock-dev/paddock/api/proto/envd/process/processpbconnect"
	"github.com/paddock-dev/paddock/internal/devcluster"
	"github.com/paddock-dev/paddock/internal/image"
	"github.com/paddock-dev/paddock/test/framework"
)

// extract unpacks the image's layer into dir, keeping modes and owners.
func extract(t *testing.T, r io.Reader, dir string) {
	t.Helper()
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(dir, h.Name)
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(dst, 0o755)
		case tar.TypeSymlink:
			err = os.Symlink(h.Linkname, dst)
		case tar.TypeReg:
			var f *os.File
			if f, err = os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600); err == nil {
				_, err = io.Copy(f, tr)
				f.Close()
			}
		}
		if err != nil {
			t.Fatalf("extracting %s: %v", h.Name, err)
		}
		if err := os.Lchown(dst, h.Uid, h.Gid); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag != tar.TypeSymlink {
			if err := os.Chmod(dst, os.FileMode(h.Mode).Perm()|modeBits(h.Mode)); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func modeBits(m int64) os.FileMode {
	if m&0o1000 != 0 {
		return os.ModeSticky
	}
	return 0
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func TestSandboxImageRunsAsUID1000WithoutVolumes(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to chroot and switch to uid 1000 (CI runs as root)")
	}
	work := t.TempDir()
	sandboxd := filepath.Join(work, "sandboxd")
	build := exec.Command("go", "build", "-trimpath", "-o", sandboxd, "github.com/paddock-dev/paddock/cmd/sandboxd")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building sandboxd: %v\n%s", err, out)
	}
	tree, err := devcluster.SandboxImageTree("", "", sandboxd)
	if err != nil {
		t.Fatal(err) // `make image-deps` installs busybox-static and bash-static
	}
	img, err := image.FromTree(tree, devcluster.SandboxImageConfig)
	if err != nil {
		t.Fatal(err)
	}
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	rootfs := filepath.Join(work, "rootfs")
	if err := os.Mkdir(rootfs, 0o755); err != nil {
		t.Fatal(err)
	}
	extract(t, rc, rootfs)
	rc.Close()

	envdPort := freePort(t)
	cmd := exec.Command(devcluster.SandboxImageConfig.Entrypoint[0],
		"--listen-host=127.0.0.1", "--grpc-port="+strconv.Itoa(freePort(t)), "--rest-port="+strconv.Itoa(freePort(t)),
		"--legacy-port=0", "--envd-port="+strconv.Itoa(envdPort), "--token=image-test-token")
	// What the container runtime would give uid 1000 of this image: its PATH and passwd home.
	cmd.Env = append([]string{"HOME=/home/user"}, devcluster.SandboxImageConfig.Env...)
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: rootfs, Credential: &syscall.Credential{Uid: 1000, Gid: 1000}}
	var logs strings.Builder
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		if err := <-exited; err != nil {
			t.Logf("sandboxd stopped: %v", err) // the test's SIGTERM; logged, not a failure
		}
	})

	base := fmt.Sprintf("http://127.0.0.1:%d", envdPort)
	framework.EventuallyWithin(t, 60*time.Second, func(context.Context) error {
		select {
		case err := <-exited:
			t.Fatalf("sandboxd exited as uid 1000 without volumes: %v\n%s", err, logs.String())
		default:
		}
		resp, err := http.Get(base + "/health")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNoContent {
			return fmt.Errorf("health %d", resp.StatusCode)
		}
		return nil
	})

	client := processpbconnect.NewProcessClient(http.DefaultClient, base, connect.WithProtoJSON())
	req := connect.NewRequest(&pb.StartRequest{Process: &pb.ProcessConfig{Cmd: "/bin/bash",
		Args: []string{"-l", "-c", "id -u; echo $HOME; pwd; echo ok > /workspace/f; cat /home/user/f"}}})
	req.Header().Set("X-Access-Token", "image-test-token")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stream, err := client.Start(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	var end *pb.ProcessEvent_EndEvent
	for stream.Receive() {
		ev := stream.Msg().GetEvent()
		out.Write(ev.GetData().GetStdout())
		out.Write(ev.GetData().GetStderr())
		if ev.GetEnd() != nil {
			end = ev.GetEnd()
		}
	}
	if want := "1000\n/home/user\n/workspace\nok\n"; end == nil || end.GetExitCode() != 0 || out.String() != want {
		t.Fatalf("bash in the image: end %v output %q (%v), want %q\nsandboxd logs:\n%s", end, out.String(), stream.Err(), want, logs.String())
	}
}
