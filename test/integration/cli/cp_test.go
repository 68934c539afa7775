package cli

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/creack/pty"
	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/paddock-dev/paddock/internal/cli"
	"github.com/paddock-dev/paddock/internal/credentials"
	"github.com/paddock-dev/paddock/internal/sandboxd/server"
	"github.com/paddock-dev/paddock/sdk"
	"github.com/paddock-dev/paddock/test/framework"
	"github.com/paddock-dev/paddock/test/sandboxdtest"
)

// loopbackSandboxd serves the real sandboxd's REST file API and gRPC ProcessService on
// 127.0.0.1 until the test ends: what the Pod of the claim's Sandbox would run, requiring the
// token the controller put in the Sandbox's credentials Secret, so every CLI call must carry it.
// It returns the REST port and the sandbox root on disk; grpcPort is the gRPC port.
func loopbackSandboxd(t *testing.T, ns, claim string) (port int, root string) {
	port, _, root = loopbackSandboxdGRPC(t, ns, claim)
	return port, root
}

func loopbackSandboxdGRPC(t *testing.T, ns, claim string) (restPort, grpcPort int, root string) {
	t.Helper()
	token := sandboxToken(t, ns, claim)
	var ls server.Listeners
	var err error
	for _, l := range []*net.Listener{&ls.REST, &ls.GRPC} {
		if *l, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
	}
	root = sandboxdtest.ServeWithToken(t, ls, token)
	return ls.REST.Addr().(*net.TCPAddr).Port, ls.GRPC.Addr().(*net.TCPAddr).Port, root
}

// fileState is what a round trip must keep of one file: its bytes and permission bits.
type fileState struct {
	Mode fs.FileMode
	Data []byte
}

// tree reads every file and directory under root ("" for directories' data).
func tree(t *testing.T, root string) map[string]fileState {
	t.Helper()
	out := map[string]fileState{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		info, err := d.Info()
		if err != nil {
			return err
		}
		st := fileState{Mode: info.Mode().Perm()}
		if d.IsDir() {
			st.Mode |= fs.ModeDir
		} else if st.Data, err = os.ReadFile(p); err != nil {
			return err
		}
		out[rel] = st
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func writeFile(t *testing.T, p string, data []byte, mode fs.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil { // not subject to the umask
		t.Fatal(err)
	}
}

// TestCopyRoundTrips copies a binary file, stdin and a directory tree into a sandbox and back,
// through the real sandboxd, and proves every byte and permission bit came back.
func TestCopyRoundTrips(t *testing.T) {
	_, kc, rp, root := claimedAgent(t)
	local := t.TempDir()

	blob := make([]byte, 5<<20+3) // larger than one read buffer, every byte value
	if _, err := rand.Read(blob); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(local, "blob.bin"), blob, 0o640)
	mustPaddock(t, kc, "cp", "--rest-port", rp, filepath.Join(local, "blob.bin"), "agent:in/blob.bin")
	if got := tree(t, filepath.Join(root, "in"))["blob.bin"]; got.Mode != 0o640 || !bytes.Equal(got.Data, blob) {
		t.Errorf("blob.bin in the sandbox: mode %o, %d bytes (equal %v); want 0640 and the %d bytes sent", got.Mode, len(got.Data), bytes.Equal(got.Data, blob), len(blob))
	}
	back := filepath.Join(local, "back")
	if err := os.Mkdir(back, 0o755); err != nil {
		t.Fatal(err)
	}
	mustPaddock(t, kc, "cp", "--rest-port", rp, "agent:in/blob.bin", back) // into the existing directory
	if got := tree(t, back)["blob.bin"]; got.Mode != 0o640 || !bytes.Equal(got.Data, blob) {
		t.Errorf("blob.bin downloaded: mode %o, equal %v; want 0640 and the original bytes", got.Mode, bytes.Equal(got.Data, blob))
	}

	// "-": stdin into a file, the file to stdout.
	mustPaddockIn(t, kc, bytes.NewReader(blob[:70000]), "cp", "--rest-port", rp, "-", "agent:piped.bin")
	stdout, _ := mustPaddock(t, kc, "cp", "--rest-port", rp, "agent:piped.bin", "-")
	if !bytes.Equal([]byte(stdout), blob[:70000]) {
		t.Errorf("cp agent:piped.bin - gave %d bytes, want the 70000 sent through stdin", len(stdout))
	}

	// A directory tree with a binary file, modes, nesting and an empty directory.
	src := filepath.Join(local, "proj")
	writeFile(t, filepath.Join(src, "main.py"), []byte("print(6*7)\n"), 0o644)
	writeFile(t, filepath.Join(src, "bin", "tool"), blob[:4096], 0o755)
	writeFile(t, filepath.Join(src, "deep", "er", "key"), []byte("s3cret"), 0o600)
	if err := os.MkdirAll(filepath.Join(src, "empty"), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(src, "empty"), 0o750); err != nil {
		t.Fatal(err)
	}
	mustPaddock(t, kc, "cp", "--rest-port", rp, src, "agent:") // into the sandbox root
	if diff := cmp.Diff(tree(t, src), tree(t, filepath.Join(root, "proj"))); diff != "" {
		t.Errorf("proj in the sandbox differs from the local tree (-local +sandbox):\n%s", diff)
	}
	mustPaddock(t, kc, "cp", "--rest-port", rp, "agent:proj", filepath.Join(local, "proj-back")) // to a new name
	if diff := cmp.Diff(tree(t, src), tree(t, filepath.Join(local, "proj-back"))); diff != "" {
		t.Errorf("proj after the round trip (-sent +received):\n%s", diff)
	}
	// Absolute paths under the sandbox root name the same place.
	mustPaddock(t, kc, "cp", "--rest-port", rp, "agent:"+root+"/proj/main.py", filepath.Join(local, "main-abs.py"))
	if b, err := os.ReadFile(filepath.Join(local, "main-abs.py")); err != nil || string(b) != "print(6*7)\n" {
		t.Errorf("main.py by absolute path = %q, %v", b, err)
	}
}

// claimedAgent claims the sandbox "agent" in a fresh namespace from a pool of one, whose Pod
// answers on a loopback sandboxd, and returns the namespace, a kubeconfig for it, sandboxd's REST
// port and its root directory.
func claimedAgent(t *testing.T) (ns, kc, restPort, root string) {
	t.Helper()
	ns = env.Namespace(t)
	kc = kubeconfig(t, ns)
	env.PlayKubelet(t, ns, "127.0.0.1") // the test's sandboxd listens on loopback
	makePool(t, ns, 1)
	mustPaddock(t, kc, "claim", "--pool", "pool", "--name", "agent")
	port, root := loopbackSandboxd(t, ns, "agent")
	return ns, kc, strconv.Itoa(port), root
}

// TestCopyErrorsNameTheProblem: each failure says what was wrong, and none leaves a partial
// file behind or changes one that was there.
func TestCopyErrorsNameTheProblem(t *testing.T) {
	ns, kc, rp, root := claimedAgent(t)
	local := t.TempDir()
	writeFile(t, filepath.Join(local, "keep.txt"), []byte("mine"), 0o644)
	writeFile(t, filepath.Join(root, "dir", "f.txt"), []byte("theirs"), 0o644)
	before := tree(t, local)

	tests := []struct {
		args    []string
		wantErr string
	}{
		{[]string{filepath.Join(local, "missing.txt"), "agent:x"}, "local source " + filepath.Join(local, "missing.txt") + ": stat"},
		{[]string{"agent:missing.txt", local}, "agent:missing.txt does not exist in the sandbox"},
		{[]string{filepath.Join(local, "keep.txt"), "agent:../outside.txt"}, "sandboxd refused agent:../outside.txt: the path leaves the sandbox root"},
		{[]string{"agent:../../etc/passwd", local}, "sandboxd refused agent:../../etc/passwd"},
		{[]string{"agent:dir", "-"}, "agent:dir is a directory: copy it to a local directory instead of -"},
		{[]string{"-", "agent:dir"}, "agent:dir is a directory: name the file to write stdin to"},
		{[]string{local, "agent:dir/f.txt"}, "dir/f.txt is a file; a directory cannot replace it"},
		{[]string{"agent:dir/f.txt", filepath.Join(local, "no", "such", "dir", "f")}, "local directory " + filepath.Join(local, "no", "such", "dir") + " does not exist"},
		{[]string{"nobody:f", local}, fmt.Sprintf(`claim "nobody" not found in namespace %q`, ns)},
		{[]string{"./a", "./b"}, "one side of paddock cp must be in a sandbox"},
		{[]string{"a:x", "b:y"}, "both in sandboxes"},
		{[]string{"--rest-port", "0", "agent:x", local}, "--rest-port 0: must be between 1 and 65535"},
	}
	for _, tc := range tests {
		args := append([]string{"cp", "--rest-port", rp}, tc.args...)
		_, _, err := paddock(t, kc, args...)
		if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("paddock %s: err = %v, want it to contain %q", strings.Join(args, " "), err, tc.wantErr)
		}
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(root), "outside.txt")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a refused upload wrote outside the sandbox root: %v", err)
	}
	if diff := cmp.Diff(before, tree(t, local)); diff != "" {
		t.Errorf("local directory after the failed copies (-want +got):\n%s", diff)
	}
	if b, err := os.ReadFile(filepath.Join(root, "dir", "f.txt")); err != nil || string(b) != "theirs" {
		t.Errorf("dir/f.txt in the sandbox after the failed copies = %q, %v; want it untouched", b, err)
	}

	// A suspended sandbox is refused at once with what to do, not after the timeout.
	mustPaddock(t, kc, "suspend", "agent")
	_, _, err := paddock(t, kc, "cp", "--rest-port", rp, "--timeout", "1h", "agent:dir/f.txt", local)
	if !errors.Is(err, sdk.ErrSuspended) || !strings.Contains(err.Error(), "paddock resume agent") {
		t.Errorf("cp from a suspended sandbox: err = %v, want ErrSuspended saying to run paddock resume agent", err)
	}
	mustPaddock(t, kc, "resume", "agent")
	mustPaddock(t, kc, "cp", "--rest-port", rp, "agent:dir/f.txt", local)
	if b, err := os.ReadFile(filepath.Join(local, "f.txt")); err != nil || string(b) != "theirs" {
		t.Errorf("f.txt after resume = %q, %v", b, err)
	}
}

// TestCopyShowsProgressOnATerminal: with stderr on a terminal a large copy draws a progress
// line that ends at 100%; with stderr on a pipe (every other test) it prints nothing.
func TestCopyShowsProgressOnATerminal(t *testing.T) {
	_, kc, rp, root := claimedAgent(t)
	big := filepath.Join(t.TempDir(), "big.bin")
	writeFile(t, big, make([]byte, 8<<20), 0o644)

	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer ptmx.Close()
	screen := make(chan string, 1)
	go func() {
		var b strings.Builder
		_, _ = io.Copy(&b, ptmx) // ends when the terminal's other side is closed
		screen <- b.String()
	}()
	cmd := &cobra.Command{Use: "paddock", SilenceUsage: true, SilenceErrors: true}
	cli.AddCommands(cmd)
	var stdout bytes.Buffer
	cmd.SetOut(&stdout)
	cmd.SetErr(tty)
	cmd.SetArgs([]string{"--kubeconfig", kc, "cp", "--rest-port", rp, big, "agent:big.bin"})
	err = cmd.ExecuteContext(framework.Context(t, framework.DefaultTimeout))
	tty.Close()
	if err != nil {
		t.Fatal(err)
	}
	got := <-screen
	if !strings.Contains(got, "copying "+big+"  ") || !strings.Contains(got, "8.0 MiB / 8.0 MiB  100%") {
		t.Errorf("terminal shows %q, want a progress line for %s ending at 100%%", got, big)
	}
	if info, err := os.Stat(filepath.Join(root, "big.bin")); err != nil || info.Size() != 8<<20 {
		t.Errorf("big.bin in the sandbox: %v, %v", info, err)
	}
}

// sandboxToken reads the token of the claim's Sandbox from its credentials Secret.
func sandboxToken(t *testing.T, ns, claim string) string {
	t.Helper()
	ctx := framework.Context(t, framework.DefaultTimeout)
	c, err := getClaim(ctx, ns, claim)
	if err != nil {
		t.Fatal(err)
	}
	secret := &corev1.Secret{}
	key := client.ObjectKey{Namespace: ns, Name: credentials.SandboxSecretName(c.Status.Sandbox.Name)}
	if err := env.Client.Get(ctx, key, secret); err != nil {
		t.Fatalf("reading the credentials Secret of claim %s: %v", claim, err)
	}
	tok := string(secret.Data[credentials.TokenDataKey])
	if tok == "" {
		t.Fatalf("secret %s has no token", key)
	}
	return tok
}
