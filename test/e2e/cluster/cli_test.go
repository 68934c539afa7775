package cluster

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	"github.com/paddock-dev/paddock/internal/manager"
	"github.com/paddock-dev/paddock/test/builder"
	"github.com/paddock-dev/paddock/test/framework"
)

// cliRun is one run of the paddock binary.
type cliRun struct {
	stdout, stderr string
	code           int
}

// cliEnv runs the paddock binary against the cluster in one namespace, as a user would.
type cliEnv struct {
	t   *testing.T
	bin string
	ns  string
	// stdin, when set, is the next run's standard input.
	stdin io.Reader
}

// run runs paddock with args and returns what it printed and its exit code.
func (e *cliEnv) run(args ...string) cliRun {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, e.bin, append([]string{"--kubeconfig", suite.kubeconfig, "-n", e.ns}, args...)...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr, cmd.Stdin = &out, &errOut, e.stdin
	e.stdin = nil
	err := cmd.Run()
	var exitErr *exec.ExitError
	code := 0
	switch {
	case errors.As(err, &exitErr):
		code = exitErr.ExitCode()
	case err != nil:
		e.t.Fatalf("running paddock %s: %v", strings.Join(args, " "), err)
	}
	return cliRun{stdout: out.String(), stderr: errOut.String(), code: code}
}

// must runs paddock with args and fails the test unless it exits 0.
func (e *cliEnv) must(args ...string) cliRun {
	e.t.Helper()
	r := e.run(args...)
	if r.code != 0 {
		e.t.Fatalf("paddock %s: exit code %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r
}

// paddockBinary is the CLI the suite built, or a fresh build when the suite uses a running
// cluster and so built none.
func paddockBinary(t *testing.T) string {
	if suite.paddock != "" {
		return suite.paddock
	}
	bin := filepath.Join(t.TempDir(), "paddock")
	build := exec.Command("go", "build", "-o", bin, "./cmd/paddock")
	build.Dir = framework.RepoRoot()
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/paddock: %v\n%s", err, out)
	}
	return bin
}

// sandboxdTemplateWithVolume is examples/sandboxd-template.yaml with /workspace on a volume
// claim instead of an emptyDir, so files survive suspend and resume.
func sandboxdTemplateWithVolume(t *testing.T, ns string) *extensionsv1beta1.SandboxTemplate {
	t.Helper()
	objs, err := framework.ReadExample("sandboxd-template.yaml")
	if err != nil {
		t.Fatal(err)
	}
	tpl := &extensionsv1beta1.SandboxTemplate{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(objs[0].Object, tpl); err != nil {
		t.Fatal(err)
	}
	tpl.Namespace = ns
	spec := &tpl.Spec.PodTemplate.Spec
	withoutMissingRuntimeClass(t, spec)
	spec.Volumes = slicesDelete(spec.Volumes, func(v corev1.Volume) bool { return v.Name == "workspace" })
	tpl.Spec.VolumeClaimTemplates = append(tpl.Spec.VolumeClaimTemplates, builder.VolumeClaimTemplate("workspace", "64Mi"))
	return tpl
}

func slicesDelete[T any](s []T, del func(T) bool) []T {
	var out []T
	for _, v := range s {
		if !del(v) {
			out = append(out, v)
		}
	}
	return out
}

// testCLIVerbs drives every sandbox verb of the paddock binary against the installed controller
// and a warm pool of sandboxd on the real node: pool ls and scale, claim, ls and get in every
// format, exec, cp both ways, suspend and resume keeping a file on the volume, completion and
// delete.
func testCLIVerbs(t *testing.T) {
	ns := namespace(t)
	ctx := framework.Context(t, 10*time.Minute)
	c, err := client.New(suite.restConfig, client.Options{Scheme: manager.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	tpl := sandboxdTemplateWithVolume(t, ns)
	framework.MustCreate(t, ctx, c, tpl)
	framework.MustCreate(t, ctx, c, builder.MakeWarmPool("sandboxd", ns, "sandboxd").Replicas(1).Obj())
	cli := &cliEnv{t: t, bin: paddockBinary(t), ns: ns}

	framework.EventuallyWithin(t, 3*time.Minute, func(context.Context) error {
		return poolReplicas(cli, 1, 1)
	})
	r := cli.must("pool", "ls")
	if got := []string{field(t, r.stdout, "sandboxd", "TEMPLATE"), field(t, r.stdout, "sandboxd", "READY")}; !cmp.Equal(got, []string{"sandboxd", "1"}) {
		t.Errorf("pool ls TEMPLATE, READY = %v, want [sandboxd 1]:\n%s", got, r.stdout)
	}

	r = cli.must("claim", "--pool", "sandboxd", "--name", "agent")
	t.Logf("paddock claim:\n%s%s", r.stdout, r.stderr)
	claim := &extensionsv1beta1.SandboxClaim{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "agent"}, claim); err != nil {
		t.Fatal(err)
	}
	sandbox := claim.Status.Sandbox.Name
	if sandbox == "" || field(t, r.stdout, "agent", "SANDBOX") != sandbox || len(claim.Status.Sandbox.PodIPs) == 0 || field(t, r.stdout, "agent", "IP") != claim.Status.Sandbox.PodIPs[0] {
		t.Fatalf("claim output:\n%s\nwant sandbox %q with IP %v", r.stdout, sandbox, claim.Status.Sandbox.PodIPs)
	}
	checkListings(t, cli, sandbox)
	if rc := tpl.Spec.PodTemplate.Spec.RuntimeClassName; rc != nil {
		// The pool's members, and so the claimed sandbox, run under the example's gVisor: exec,
		// cp, suspend and resume below all go through it.
		expectRuntimeClass(t, ctx, c, ns, sandbox, *rc)
	}

	r = cli.must("exec", "agent", "--", "sh", "-c", "echo hello from $(hostname); echo to-stderr >&2")
	if r.stdout != "hello from "+sandbox+"\n" || r.stderr != "to-stderr\n" {
		t.Errorf("exec output: stdout %q stderr %q; want the hostname %s and the stderr line", r.stdout, r.stderr, sandbox)
	}
	if r = cli.run("exec", "agent", "--", "sh", "-c", "exit 7"); r.code != 7 || r.stderr != "" {
		t.Errorf("exec of exit 7: code %d, stderr %q; want 7 and no message of paddock's own", r.code, r.stderr)
	}
	testCLIStdin(t, cli)

	local := t.TempDir()
	blob := make([]byte, 3<<20+5)
	if _, err := rand.Read(blob); err != nil {
		t.Fatal(err)
	}
	writeLocal(t, filepath.Join(local, "proj", "blob.bin"), blob)
	writeLocal(t, filepath.Join(local, "proj", "src", "main.py"), []byte("print(6*7)\n"))
	cli.must("cp", filepath.Join(local, "proj"), "agent:/workspace/")
	if r = cli.must("exec", "agent", "--", "cat", "/workspace/proj/src/main.py"); r.stdout != "print(6*7)\n" {
		t.Errorf("main.py as the sandbox sees it = %q", r.stdout)
	}
	cli.must("cp", "agent:proj", filepath.Join(local, "back"))
	for _, f := range []string{"blob.bin", "src/main.py"} {
		want, _ := os.ReadFile(filepath.Join(local, "proj", f))
		got, err := os.ReadFile(filepath.Join(local, "back", f))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s after the round trip through the pod: %d bytes, %v; want the %d sent", f, len(got), err, len(want))
		}
	}
	cli.stdin = strings.NewReader("written before suspend\n")
	cli.must("cp", "-", "agent:notes/kept.txt")
	if r = cli.run("cp", "agent:../../etc/passwd", local); r.code == 0 || !strings.Contains(r.stderr, "sandboxd refused") {
		t.Errorf("cp of a path outside the root: code %d, stderr %q; want a refusal", r.code, r.stderr)
	}

	cli.must("suspend", "agent")
	if err := podGone(ctx, c, ns, sandbox); err != nil {
		t.Errorf("after paddock suspend: %v", err)
	}
	if r = cli.run("exec", "agent", "--", "true"); r.code == 0 || !strings.Contains(r.stderr, "paddock resume agent") {
		t.Errorf("exec in a suspended sandbox: code %d, stderr %q; want an error saying to resume", r.code, r.stderr)
	}
	r = cli.must("resume", "agent")
	t.Logf("paddock resume: %s", r.stdout)
	if r = cli.must("cp", "agent:notes/kept.txt", "-"); r.stdout != "written before suspend\n" {
		t.Errorf("file written before suspend, after resume = %q; want it kept on the volume", r.stdout)
	}

	if got := completions(cli, "get", ""); !cmp.Equal(got, []string{"agent"}) {
		t.Errorf("completing get CLAIM = %v, want [agent]", got)
	}
	if got := completions(cli, "pool", "scale", ""); !cmp.Equal(got, []string{"sandboxd"}) {
		t.Errorf("completing pool scale POOL = %v, want [sandboxd]", got)
	}
	for _, shell := range []string{"bash", "zsh", "fish", "powershell"} {
		if r = cli.must("completion", shell); !strings.Contains(r.stdout, "paddock") {
			t.Errorf("completion %s printed no script for paddock:\n%.200s", shell, r.stdout)
		}
	}

	cli.must("pool", "scale", "sandboxd", "--replicas", "2")
	framework.EventuallyWithin(t, 3*time.Minute, func(context.Context) error { return poolReplicas(cli, 2, 2) })
	cli.must("pool", "scale", "sandboxd", "--replicas", "0")
	framework.EventuallyWithin(t, 3*time.Minute, func(context.Context) error { return poolReplicas(cli, 0, 0) })

	cli.must("delete", "agent")
	framework.EventuallyWithin(t, 2*time.Minute, func(ctx context.Context) error {
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "agent"}, claim); !apierrors.IsNotFound(err) {
			return fmt.Errorf("claim agent still there (get: %v)", err)
		}
		return podGone(ctx, c, ns, sandbox)
	})
	if r = cli.must("ls"); strings.Contains(r.stdout, "agent") {
		t.Errorf("ls after delete still lists agent:\n%s", r.stdout)
	}
}

// checkListings checks ls and get in table, JSON and YAML.
func checkListings(t *testing.T, cli *cliEnv, sandbox string) {
	t.Helper()
	r := cli.must("ls")
	if got := []string{field(t, r.stdout, "agent", "READY"), field(t, r.stdout, "agent", "SANDBOX"), field(t, r.stdout, "agent", "POOL")}; !cmp.Equal(got, []string{"True", sandbox, "sandboxd"}) {
		t.Errorf("ls READY, SANDBOX, POOL = %v, want [True %s sandboxd]:\n%s", got, sandbox, r.stdout)
	}
	for _, format := range []string{"json", "yaml"} {
		r = cli.must("ls", "-o", format)
		list := &extensionsv1beta1.SandboxClaimList{}
		if err := yaml.Unmarshal([]byte(r.stdout), list); err != nil || len(list.Items) != 1 || list.Items[0].Status.Sandbox.Name != sandbox {
			t.Errorf("ls -o %s: %v; want the one claim bound to %s:\n%s", format, err, sandbox, r.stdout)
		}
		r = cli.must("get", "agent", "-o", format)
		got := &extensionsv1beta1.SandboxClaim{}
		if err := yaml.Unmarshal([]byte(r.stdout), got); err != nil || got.Name != "agent" || got.Spec.WarmPoolRef.Name != "sandboxd" {
			t.Errorf("get -o %s: %v; want claim agent of pool sandboxd:\n%s", format, err, r.stdout)
		}
	}
	r = cli.must("get", "agent")
	if field(t, r.stdout, "agent", "SANDBOX") != sandbox {
		t.Errorf("get table:\n%s\nwant sandbox %s", r.stdout, sandbox)
	}
}

// poolReplicas reads the pool through `paddock pool ls -o json` and wants its counts.
func poolReplicas(cli *cliEnv, replicas, ready int32) error {
	r := cli.run("pool", "ls", "-o", "json")
	list := &extensionsv1beta1.SandboxWarmPoolList{}
	if err := json.Unmarshal([]byte(r.stdout), list); err != nil || len(list.Items) != 1 {
		return fmt.Errorf("pool ls -o json (exit %d): %v\n%s%s", r.code, err, r.stdout, r.stderr)
	}
	if st := list.Items[0].Status; st.Replicas != replicas || st.ReadyReplicas != ready {
		return fmt.Errorf("pool status replicas %d ready %d, want %d and %d", st.Replicas, st.ReadyReplicas, replicas, ready)
	}
	return nil
}

// completions runs cobra's __complete as the shell scripts do and returns the candidates.
func completions(cli *cliEnv, args ...string) []string {
	r := cli.must(append([]string{"__complete"}, args...)...)
	var got []string
	for _, line := range strings.Split(r.stdout, "\n") {
		if line != "" && !strings.HasPrefix(line, ":") && !strings.HasPrefix(line, "Completion ended") {
			got = append(got, line)
		}
	}
	return got
}

// field returns the column col of the table row whose first column is name.
func field(t *testing.T, table, name, col string) string {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(table), "\n")
	header := strings.Fields(lines[0])
	for _, l := range lines[1:] {
		cells := strings.Fields(l)
		if len(cells) != len(header) || cells[0] != name {
			continue
		}
		for i, h := range header {
			if h == col {
				return cells[i]
			}
		}
	}
	t.Errorf("no column %s for row %s in table:\n%s", col, name, table)
	return ""
}

func writeLocal(t *testing.T, p string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
}
