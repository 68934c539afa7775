package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	"github.com/paddock-dev/paddock/api/e2b"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	"github.com/paddock-dev/paddock/internal/e2baccess"
	"github.com/paddock-dev/paddock/internal/image"
	"github.com/paddock-dev/paddock/test/builder"
	"github.com/paddock-dev/paddock/test/framework"
)

// What the bring-your-own images serve: a web page on byoServicePort.
const (
	byoServicePort = 8000
	byoServiceBody = "served-by-the-image-itself"
)

// testBYOImage builds two images from Debian's static busybox and bash in the test, neither with
// sandboxd, and runs them through templates that ask for sandboxd injection (docs/byo-image.md):
// the one whose command is a web server works with the unmodified E2B SDK, `paddock exec` and
// `paddock mcp` while its server still answers; the one without a shell, and the first one run
// as root, get the ImageIncompatible condition naming the cause, on the Sandbox and the pool.
func testBYOImage(t *testing.T) {
	ns := namespace(t)
	ctx := framework.Context(t, 20*time.Minute)
	c := paddockClient(t)
	web, noShell, webCmd := pushBYOImages(t, ctx)
	rc := devRuntimeClass(t, ctx, c)
	serve := []string{"httpd", "-f", "-p", fmt.Sprint(byoServicePort), "-h", "/srv/www"}
	for _, obj := range []client.Object{
		byoTemplate(ns, "byo-web", web, rc, true, serve...),
		// No command: the controller reads the image's from the dev registry's reader address.
		byoTemplate(ns, "byo-nocmd", webCmd, rc, true), poolOf(ns, "byo-nocmd", 1),
		byoTemplate(ns, "byo-noshell", noShell, rc, true, append([]string{"/opt/busybox/busybox"}, serve...)...),
		byoTemplate(ns, "byo-root", web, rc, false, serve...),
		poolOf(ns, "byo-web", 2), poolOf(ns, "byo-noshell", 1),
	} {
		framework.MustCreate(t, ctx, c, obj)
	}
	waitPoolReady(t, c, ns, "byo-web", 2)

	t.Run("the unmodified E2B SDK runs commands and files; the image's service answers", func(t *testing.T) {
		key, _, err := e2baccess.CreateAPIKey(ctx, c, e2b.DefaultAPIKeyNamespace, ns)
		if err != nil {
			t.Fatal(err)
		}
		url, err := e2baccess.RouterURL(ctx, c, routerNamespace, e2b.DefaultPort)
		if err != nil {
			t.Fatal(err)
		}
		env := append(os.Environ(), "E2B_API_URL="+url, "E2B_SANDBOX_URL="+url, "E2B_API_KEY="+key, "E2B_PKG="+e2bSDKs[0],
			"E2B_TEMPLATE=byo-web", fmt.Sprintf("SERVICE_PORT=%d", byoServicePort), "SERVICE_BODY="+byoServiceBody)
		out, err := node(t, ctx, e2bClientDir(t), env, "byo.mjs")
		lines := strings.Split(strings.TrimSpace(out), "\n")
		var res struct{ ID string }
		if err != nil || json.Unmarshal([]byte(lines[len(lines)-1]), &res) != nil || res.ID == "" {
			t.Fatalf("byo.mjs: %v", err)
		}
		// The same service, from the host by the sandbox's pod IP: it serves the cluster as it would without Paddock.
		var claim extensionsv1beta1.SandboxClaim
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: res.ID}, &claim); err != nil || len(claim.Status.Sandbox.PodIPs) == 0 {
			t.Fatalf("claim of E2B sandbox %s: %v, pod IPs %v", res.ID, err, claim.Status.Sandbox.PodIPs)
		}
		expectRuntimeClassOf(t, ctx, c, ns, claim.Status.Sandbox.Name, rc)
		page := fmt.Sprintf("http://%s:%d/", claim.Status.Sandbox.PodIPs[0], byoServicePort)
		framework.EventuallyWithin(t, time.Minute, func(ctx context.Context) error {
			body, err := httpGet(ctx, page)
			if err != nil || !strings.Contains(body, byoServiceBody) {
				return fmt.Errorf("GET %s = %q, %v; want the image's page", page, body, err)
			}
			return nil
		})
	})

	t.Run("paddock exec", func(t *testing.T) {
		cli := &cliEnv{t: t, bin: paddockBinary(t), ns: ns}
		cli.must("claim", "--pool", "byo-web", "--name", "cli")
		if r := cli.must("exec", "cli", "--", "sh", "-c", "id -u; cat /srv/www/index.html"); r.stdout != "1000\n"+byoServiceBody+"\n" {
			t.Errorf("paddock exec: stdout %q stderr %q; want uid 1000 and the image's page", r.stdout, r.stderr)
		}
		if r := cli.run("exec", "cli", "--", "sh", "-c", "exit 5"); r.code != 5 {
			t.Errorf("paddock exec of exit 5: code %d, stderr %q", r.code, r.stderr)
		}
	})

	t.Run("paddock mcp", func(t *testing.T) {
		framework.NodePackage(t, mcpClientDir)
		bin := paddockBinary(t)
		steps := []mcpStep{
			{"claim_sandbox", map[string]any{"pool": "byo-web", "name": "mcp-byo", "timeout_seconds": 300}},
			{"run_command", map[string]any{"sandbox": "mcp-byo", "command": "id -u && cat /srv/www/index.html"}},
			{"write_file", map[string]any{"sandbox": "mcp-byo", "path": "notes.txt", "content": "from mcp"}},
			{"read_file", map[string]any{"sandbox": "mcp-byo", "path": "notes.txt"}},
			{"delete_sandbox", map[string]any{"name": "mcp-byo"}},
		}
		report := runMCPClient(t, ctx, steps, nil, append([]string{"stdio", bin}, "--kubeconfig", suite.kubeconfig, "-n", ns, "mcp", "--pools", "byo-web")...)
		if len(report.Results) != len(steps) {
			t.Fatalf("%d results, want %d: %+v", len(report.Results), len(steps), report.Results)
		}
		for i, r := range report.Results {
			if r.IsError {
				t.Errorf("step %d (%s): %s", i, r.Tool, r.Text)
			}
		}
		if got := report.Results[1].Structured["stdout"]; got != "1000\n"+byoServiceBody+"\n" {
			t.Errorf("run_command stdout %q, want uid 1000 and the image's page", got)
		}
		if got := report.Results[3].Structured["content"]; got != "from mcp" {
			t.Errorf("read_file content %q, want what write_file wrote", got)
		}
	})

	t.Run("a template with no command runs its dev-registry image's own command, whose service answers", func(t *testing.T) {
		waitPoolReady(t, c, ns, "byo-nocmd", 1)
		var list agentsv1beta1.SandboxList
		if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		var member *agentsv1beta1.Sandbox
		pool := &extensionsv1beta1.SandboxWarmPool{ObjectMeta: metav1.ObjectMeta{UID: poolUID(t, ctx, c, ns, "byo-nocmd")}}
		for i := range list.Items {
			if sb := &list.Items[i]; metav1.IsControlledBy(sb, pool) && len(sb.Status.PodIPs) > 0 &&
				builder.HasCondition(sb.Status.Conditions, agentsv1beta1.SandboxConditionReady, metav1.ConditionTrue, "") == nil {
				member = sb
			}
		}
		if member == nil {
			t.Fatalf("no Ready member of pool byo-nocmd with a pod IP among %d Sandboxes", len(list.Items))
		}
		var pod corev1.Pod
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: member.Name}, &pod); err != nil {
			t.Fatal(err)
		}
		if got, want := strings.Join(pod.Spec.Containers[0].Args, " "), "--preflight -- "+strings.Join(serve, " "); got != want {
			t.Errorf("member %s runs args %q, want %q (the image's Cmd under sandboxd)", member.Name, got, want)
		}
		page := fmt.Sprintf("http://%s:%d/", member.Status.PodIPs[0], byoServicePort)
		framework.EventuallyWithin(t, time.Minute, func(ctx context.Context) error {
			body, err := httpGet(ctx, page)
			if err != nil || !strings.Contains(body, byoServiceBody) {
				return fmt.Errorf("GET %s = %q, %v; want the image's page", page, body, err)
			}
			return nil
		})
	})

	t.Run("an image without a shell: ImageIncompatible on the member and MembersIncompatible on the pool", func(t *testing.T) {
		msg := waitPoolIncompatible(t, c, ns, "byo-noshell")
		for _, want := range []string{"/bin/sh", "/bin/bash", "fix: "} {
			if !strings.Contains(msg, want) {
				t.Errorf("pool message %q does not name %q", msg, want)
			}
		}
	})

	t.Run("an image run as root: ImageIncompatible naming runAsUser", func(t *testing.T) {
		sb := builder.MakeSandbox("as-root", ns).Obj()
		var tpl extensionsv1beta1.SandboxTemplate
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "byo-root"}, &tpl); err != nil {
			t.Fatal(err)
		}
		sb.Spec.SandboxBlueprint = *tpl.Spec.SandboxBlueprint.DeepCopy()
		framework.MustCreate(t, ctx, c, sb)
		msg := waitSandboxReason(t, c, ns, sb.Name, agentsv1beta1.SandboxReasonImageIncompatible)
		if !strings.Contains(msg, "runs as root") || !strings.Contains(msg, "runAsUser") {
			t.Errorf("Ready message %q does not name root and runAsUser", msg)
		}
	})
}

// pushBYOImages builds and pushes the three images: busybox (httpd among its applets), a static
// bash and a web page; the same page with busybox alone, outside PATH, and no shell at all; and
// the first with its web server as the image's Cmd.
func pushBYOImages(t *testing.T, ctx context.Context) (web, noShell, webCmd string) {
	t.Helper()
	registry, _, _ := strings.Cut(*imageFlag, "/")
	page := []byte(byoServiceBody + "\n")
	tree, err := image.BusyboxTree("/bin/busybox")
	if err != nil {
		t.Fatal(err)
	}
	tree.AddFile("/bin/bash", "/bin/bash-static", 0o755).AddData("/srv/www/index.html", page, 0o644).AddDir("/tmp", 0o1777, 0, 0)
	path := image.Config{Env: []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}}
	images := map[string]*image.Tree{
		registry + "/e2e/byo-web:dev":     tree,
		registry + "/e2e/byo-noshell:dev": image.NewTree().AddFile("/opt/busybox/busybox", "/bin/busybox", 0o755).AddData("/srv/www/index.html", page, 0o644),
	}
	withCmd := path
	withCmd.Cmd = []string{"httpd", "-f", "-p", fmt.Sprint(byoServicePort), "-h", "/srv/www"}
	configs := map[string]image.Config{registry + "/e2e/byo-web-cmd:dev": withCmd}
	images[registry+"/e2e/byo-web-cmd:dev"] = tree
	for ref, tree := range images {
		cfg, ok := configs[ref]
		if !ok {
			cfg = path
		}
		img, err := image.FromTree(tree, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := image.Push(ctx, img, ref); err != nil {
			t.Fatalf("push %s: %v", ref, err)
		}
	}
	return registry + "/e2e/byo-web:dev", registry + "/e2e/byo-noshell:dev", registry + "/e2e/byo-web-cmd:dev"
}

// byoTemplate is the one-line opt-in on a template of image with command, as uid 1000 without
// privileges when nonRoot, else as the image's user (root).
func byoTemplate(ns, name, img string, rc *string, nonRoot bool, command ...string) *extensionsv1beta1.SandboxTemplate {
	tpl := builder.MakeTemplate(name, ns).Image(img).InjectSandboxd().Command(command).Port("http", byoServicePort).
		EnvVarsInjectionPolicy(extensionsv1beta1.EnvVarsInjectionPolicyOverrides).Obj()
	spec := &tpl.Spec.PodTemplate.Spec
	spec.RuntimeClassName = rc
	if nonRoot {
		spec.SecurityContext = &corev1.PodSecurityContext{RunAsUser: ptr[int64](1000), RunAsGroup: ptr[int64](1000),
			RunAsNonRoot: ptr(true), FSGroup: ptr[int64](1000)}
		spec.Containers[0].SecurityContext = &corev1.SecurityContext{AllowPrivilegeEscalation: ptr(false),
			Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}
	}
	return tpl
}

// devRuntimeClass is the RuntimeClass of the `base` template paddock dev up made: gVisor when
// the cluster has it.
func devRuntimeClass(t *testing.T, ctx context.Context, c client.Client) *string {
	t.Helper()
	var dev extensionsv1beta1.SandboxTemplate
	if err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: e2b.DefaultTemplate}, &dev); err != nil {
		t.Fatalf("the E2B template of paddock dev up: %v", err)
	}
	return dev.Spec.PodTemplate.Spec.RuntimeClassName
}

func expectRuntimeClassOf(t *testing.T, ctx context.Context, c client.Client, ns, name string, rc *string) {
	t.Helper()
	if rc != nil {
		expectRuntimeClass(t, ctx, c, ns, name, *rc)
	}
}

// waitPoolIncompatible waits for the pool's Progressing=False MembersIncompatible and checks its
// member says ImageIncompatible too; it returns the pool's message.
func waitPoolIncompatible(t *testing.T, c client.Client, ns, name string) string {
	t.Helper()
	var msg string
	framework.EventuallyWithin(t, 5*time.Minute, func(ctx context.Context) error {
		var p extensionsv1beta1.SandboxWarmPool
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &p); err != nil {
			return err
		}
		cond := meta.FindStatusCondition(p.Status.Conditions, extensionsv1beta1.PoolConditionProgressing)
		if cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != extensionsv1beta1.PoolReasonMembersIncompatible {
			return fmt.Errorf("pool %s: %s", name, builder.FormatConditions(p.Status.Conditions))
		}
		msg = cond.Message
		return nil
	})
	member, _, _ := strings.Cut(strings.SplitN(msg, "; ", 2)[1], ": ")
	waitSandboxReason(t, c, ns, member, agentsv1beta1.SandboxReasonImageIncompatible)
	t.Logf("pool %s: %s", name, msg)
	return msg
}

// waitSandboxReason waits for the Sandbox's Ready=False with reason and returns its message.
func waitSandboxReason(t *testing.T, c client.Client, ns, name, reason string) string {
	t.Helper()
	var msg string
	framework.EventuallyWithin(t, 5*time.Minute, func(ctx context.Context) error {
		var sb agentsv1beta1.Sandbox
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &sb); err != nil {
			return err
		}
		if err := builder.HasCondition(sb.Status.Conditions, agentsv1beta1.SandboxConditionReady, metav1.ConditionFalse, reason); err != nil {
			return fmt.Errorf("sandbox %s: %w (%s)", name, err, builder.FormatConditions(sb.Status.Conditions))
		}
		msg = meta.FindStatusCondition(sb.Status.Conditions, agentsv1beta1.SandboxConditionReady).Message
		return nil
	})
	t.Logf("sandbox %s: %s", name, msg)
	return msg
}

func poolUID(t *testing.T, ctx context.Context, c client.Client, ns, name string) types.UID {
	t.Helper()
	var p extensionsv1beta1.SandboxWarmPool
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &p); err != nil {
		t.Fatal(err)
	}
	return p.UID
}
