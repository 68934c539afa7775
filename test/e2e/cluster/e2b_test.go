package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	"github.com/paddock-dev/paddock/api/e2b"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	"github.com/paddock-dev/paddock/internal/e2baccess"
	"github.com/paddock-dev/paddock/test/framework"
)

// The pinned SDKs of the front door's Node client (test/integration/e2bfrontdoor/client).
var e2bSDKs = []string{"e2b-2.51.0", "e2b-2.50.0"}

// Burst sizes of the issue: 50 creates at once against a warm pool of 20.
const (
	e2bBurst     = 50
	e2bBurstPool = 20
)

// testE2B runs the unmodified npm e2b SDK against the router's E2B front door installed by
// `paddock dev up`, on real sandboxd pods: the front door's checks with both pinned versions
// (create with metadata and envs, commands, files, getInfo, list, setTimeout and expiry, pause and
// connect keeping a file on the volume, kill twice, a wrong key, another namespace, an unknown
// template), then 50 concurrent creates against a pool of 20.
func testE2B(t *testing.T) {
	ns, otherNS := namespace(t), namespace(t)
	ctx := framework.Context(t, 20*time.Minute)
	c := paddockClient(t)

	// The `base` template dev up made, copied into the test's namespace; `burst` is the same
	// without the volume.
	copyE2BTemplate(t, ctx, c, ns, e2b.DefaultTemplate, true)
	copyE2BTemplate(t, ctx, c, ns, "burst", false)
	for _, obj := range []client.Object{poolOf(ns, e2b.DefaultTemplate, 2), poolOf(ns, "burst", e2bBurstPool)} {
		framework.MustCreate(t, ctx, c, obj)
	}
	key, otherKey, url := e2bAPIKey(t, ctx, c, ns), e2bAPIKey(t, ctx, c, otherNS), e2bURL(t, ctx, c)
	dir := e2bClientDir(t)
	env := append(os.Environ(), "E2B_API_URL="+url, "E2B_SANDBOX_URL="+url, "E2B_API_KEY="+key)
	waitPoolReady(t, c, ns, e2b.DefaultTemplate, 2)

	for i, pkg := range e2bSDKs {
		t.Run(pkg, func(t *testing.T) {
			// autoPause and autoResume on the real idle controller, once: the SDKs send the same.
			autoPause := fmt.Sprintf("E2B_CHECK_AUTOPAUSE=%d", map[bool]int{true: 1}[i == 0])
			out, err := node(t, ctx, dir, append(env, "E2B_PKG="+pkg, "OTHER_KEY="+otherKey, "E2B_TEMPLATE="+e2b.DefaultTemplate,
				"E2B_CHECK_ENV=1", "E2B_CHECK_EXPIRY=1", autoPause), "frontdoor.mjs")
			if err != nil || !strings.Contains(out, "all checks passed") {
				t.Fatalf("the E2B SDK %s through the front door: %v", pkg, err)
			}
		})
	}

	t.Run("50 concurrent creates against a pool of 20", func(t *testing.T) {
		waitPoolReady(t, c, ns, "burst", e2bBurstPool)
		start := time.Now()
		out, err := node(t, ctx, dir, append(env, "E2B_PKG="+e2bSDKs[0], "E2B_TEMPLATE=burst", fmt.Sprintf("E2B_BURST=%d", e2bBurst)), "burst.mjs")
		t.Logf("%d creates and a command in each took %s", e2bBurst, time.Since(start).Round(time.Millisecond))
		var res struct {
			IDs           []string `json:"ids"`
			Failed        []string `json:"failed"`
			CommandFailed []string `json:"commandFailed"`
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if jerr := json.Unmarshal([]byte(lines[len(lines)-1]), &res); jerr != nil || err != nil {
			t.Fatalf("burst.mjs: %v / %v", err, jerr)
		}
		// Every sandbox create answered serves its first command: the controller never discards a
		// warm member that sandboxd bound to the claim, even when the answer to its PUT was lost
		// (TestAppliedSettingsWithALostAnswerKeepTheMember).
		for _, f := range res.CommandFailed {
			t.Errorf("the first command of a created sandbox failed: %s", f)
			logE2BSandbox(t, ctx, c, ns, strings.SplitN(f, ":", 2)[0])
		}
		distinct := map[string]bool{}
		for _, id := range res.IDs {
			distinct[id] = true
		}
		if len(distinct) != e2bBurst {
			t.Errorf("%d distinct sandbox IDs from %d creates (failed: %v)", len(distinct), e2bBurst, res.Failed)
		}
		// No Sandbox is bound twice and every sandbox has exactly one: one Sandbox per claim UID.
		var claims extensionsv1beta1.SandboxClaimList
		if err := c.List(ctx, &claims, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		var sandboxes agentsv1beta1.SandboxList
		if err := c.List(ctx, &sandboxes, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		bound := map[string][]string{}
		for _, sb := range sandboxes.Items {
			if uid := sb.Labels[agentsv1beta1.ClaimUIDLabel]; uid != "" {
				bound[uid] = append(bound[uid], sb.Name)
			}
		}
		warm := 0
		for _, cl := range claims.Items {
			if !distinct[cl.Name] {
				continue
			}
			if got := bound[string(cl.UID)]; len(got) != 1 {
				t.Errorf("claim %s is bound to Sandboxes %v; want exactly one", cl.Name, got)
			} else if got[0] != cl.Name {
				warm++ // a cold Sandbox is named after its claim; an adopted member is not
			}
		}
		t.Logf("%d of %d creates were served warm, the rest cold", warm, e2bBurst)
		waitPoolReady(t, c, ns, "burst", e2bBurstPool)
	})
}

// logE2BSandbox logs what the cluster knows of one E2B sandbox: its claim's conditions, the
// Sandbox bound to it, the namespace's events about either, and its Pod's logs.
func logE2BSandbox(t *testing.T, ctx context.Context, c client.Client, ns, id string) {
	t.Helper()
	var claim extensionsv1beta1.SandboxClaim
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: id}, &claim); err != nil {
		t.Logf("sandbox %s: claim: %v", id, err)
		return
	}
	for _, cond := range claim.Status.Conditions {
		t.Logf("sandbox %s: claim condition %s=%s %s: %s", id, cond.Type, cond.Status, cond.Reason, cond.Message)
	}
	names := map[string]bool{id: true}
	var sandboxes agentsv1beta1.SandboxList
	if err := c.List(ctx, &sandboxes, client.InNamespace(ns), client.MatchingLabels{agentsv1beta1.ClaimUIDLabel: string(claim.UID)}); err == nil {
		for _, sb := range sandboxes.Items {
			names[sb.Name] = true
			t.Logf("sandbox %s: bound Sandbox %s (launch %s, created %s, deleting %v)", id, sb.Name,
				sb.Labels[agentsv1beta1.LaunchTypeLabel], sb.CreationTimestamp, sb.DeletionTimestamp)
		}
	}
	if events, err := suite.client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{}); err == nil {
		for _, e := range events.Items {
			if names[e.InvolvedObject.Name] {
				t.Logf("sandbox %s: event %s %s %s: %s", id, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message)
			}
		}
	}
	for name := range names {
		if logs, err := suite.client.CoreV1().Pods(ns).GetLogs(name, &corev1.PodLogOptions{}).DoRaw(ctx); err == nil {
			t.Logf("sandbox %s: logs of Pod %s:\n%s", id, name, logs)
		}
	}
}

func poolOf(ns, name string, replicas int32) *extensionsv1beta1.SandboxWarmPool {
	return &extensionsv1beta1.SandboxWarmPool{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: extensionsv1beta1.SandboxWarmPoolSpec{Replicas: &replicas, TemplateRef: extensionsv1beta1.SandboxTemplateRef{Name: name}}}
}

// waitPoolReady waits until the pool has replicas ready members.
func waitPoolReady(t *testing.T, c client.Client, ns, name string, replicas int32) {
	t.Helper()
	framework.EventuallyWithin(t, 6*time.Minute, func(ctx context.Context) error {
		var p extensionsv1beta1.SandboxWarmPool
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &p); err != nil {
			return err
		}
		if p.Status.ReadyReplicas < replicas {
			return fmt.Errorf("pool %s/%s has %d of %d members ready", ns, name, p.Status.ReadyReplicas, replicas)
		}
		return nil
	})
}

// e2bAPIKey creates an E2B API key for namespace ns.
func e2bAPIKey(t *testing.T, ctx context.Context, c client.Client, ns string) string {
	t.Helper()
	key, _, err := e2baccess.CreateAPIKey(ctx, c, e2b.DefaultAPIKeyNamespace, ns)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// e2bURL is the installed router's E2B front door, by the router pod's IP.
func e2bURL(t *testing.T, ctx context.Context, c client.Client) string {
	t.Helper()
	url, err := e2baccess.RouterURL(ctx, c, routerNamespace, e2b.DefaultPort)
	if err != nil {
		t.Fatal(err)
	}
	return url
}

// e2bClientDir is the front door's Node client with its pinned SDKs installed (npm ci).
func e2bClientDir(t *testing.T) string {
	t.Helper()
	return framework.NodePackage(t, filepath.Join(framework.RepoRoot(), "test", "integration", "e2bfrontdoor", "client"))
}

// node runs a script of the client with args and logs its output line by line.
func node(t *testing.T, ctx context.Context, dir string, env []string, script string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.CommandContext(ctx, "node", append([]string{script}, args...)...)
	cmd.Dir, cmd.Env = dir, env
	out, err := cmd.CombinedOutput()
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		t.Log(line)
	}
	return string(out), err
}
