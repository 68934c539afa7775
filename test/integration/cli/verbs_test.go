package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	"github.com/paddock-dev/paddock/test/builder"
	"github.com/paddock-dev/paddock/test/framework"
)

func TestClaimListGetSuspendResumeDelete(t *testing.T) {
	ns := env.Namespace(t)
	kc := kubeconfig(t, ns) // no -n below: the namespace comes from the kubeconfig context
	env.PlayKubelet(t, ns)
	makePool(t, ns, 1)

	stdout, stderr := mustPaddock(t, kc, "claim", "--pool", "pool", "--name", "agent", "--env", "A=1", "--timeout", "1m")
	t.Logf("paddock claim:\n%s", stdout)
	if !strings.Contains(stderr, "waiting for claim agent to be Ready...") {
		t.Errorf("stderr = %q, want the progress line", stderr)
	}
	ctx := framework.Context(t, framework.DefaultTimeout)
	claim, err := getClaim(ctx, ns, "agent")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]extensionsv1beta1.EnvVar{{Name: "A", Value: "1"}}, claim.Spec.Env); diff != "" {
		t.Errorf("claim env (-want +got):\n%s", diff)
	}
	sandbox := claim.Status.Sandbox.Name
	if sandbox == "" || field(t, stdout, "agent", "SANDBOX") != sandbox || field(t, stdout, "agent", "IP") != framework.PodIP {
		t.Errorf("claim output:\n%s\nwant claim agent, sandbox %q, IP %s", stdout, sandbox, framework.PodIP)
	}
	if field(t, stdout, "agent", "LATENCY") == "" {
		t.Errorf("claim output has no latency:\n%s", stdout)
	}

	stdout, _ = mustPaddock(t, kc, "ls")
	t.Logf("paddock ls:\n%s", stdout)
	if got := []string{field(t, stdout, "agent", "READY"), field(t, stdout, "agent", "SANDBOX")}; !cmp.Equal(got, []string{"True", sandbox}) {
		t.Errorf("ls READY, SANDBOX = %v, want [True %s]:\n%s", got, sandbox, stdout)
	}
	stdout, _ = mustPaddock(t, kc, "ls", "-o", "json")
	list := &extensionsv1beta1.SandboxClaimList{}
	if err := json.Unmarshal([]byte(stdout), list); err != nil || len(list.Items) != 1 || list.Items[0].Name != "agent" {
		t.Errorf("ls -o json = %d items (%v), want the one claim agent:\n%s", len(list.Items), err, stdout)
	}
	for _, format := range []string{"json", "yaml"} {
		stdout, _ = mustPaddock(t, kc, "get", "agent", "-o", format)
		got := &extensionsv1beta1.SandboxClaim{}
		if err := yaml.Unmarshal([]byte(stdout), got); err != nil || got.Name != "agent" || got.Status.Sandbox.Name != sandbox {
			t.Errorf("get -o %s: %v; want claim agent bound to %s:\n%s", format, err, sandbox, stdout)
		}
	}
	stdout, _ = mustPaddock(t, kc, "get", "agent")
	if field(t, stdout, "agent", "POOL") != "pool" {
		t.Errorf("get table:\n%s\nwant pool column = pool", stdout)
	}

	mustPaddock(t, kc, "suspend", "agent")
	sb := &agentsv1beta1.Sandbox{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: sandbox}, sb); err != nil {
		t.Fatal(err)
	}
	if sb.Spec.OperatingMode != agentsv1beta1.SandboxOperatingModeSuspended {
		t.Errorf("operatingMode after suspend = %q, want Suspended", sb.Spec.OperatingMode)
	}
	if err := builder.HasCondition(sb.Status.Conditions, agentsv1beta1.SandboxConditionSuspended, "True", ""); err != nil {
		t.Errorf("after suspend: %v", err)
	}

	stdout, _ = mustPaddock(t, kc, "resume", "agent")
	if !strings.Contains(stdout, framework.PodIP) {
		t.Errorf("resume output %q, want the new pod IP %s", stdout, framework.PodIP)
	}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: sandbox}, sb); err != nil {
		t.Fatal(err)
	}
	if err := builder.HasCondition(sb.Status.Conditions, agentsv1beta1.SandboxConditionReady, "True", ""); err != nil || sb.Spec.OperatingMode != agentsv1beta1.SandboxOperatingModeRunning {
		t.Errorf("after resume: operatingMode %q, %v; want Running and Ready", sb.Spec.OperatingMode, err)
	}

	mustPaddock(t, kc, "delete", "agent")
	framework.Eventually(t, func(ctx context.Context) error {
		if _, err := getClaim(ctx, ns, "agent"); !apierrors.IsNotFound(err) {
			return fmt.Errorf("claim agent still there (err %v)", err)
		}
		return nil
	})
	stdout, _ = mustPaddock(t, kc, "ls")
	if strings.Contains(stdout, "agent") {
		t.Errorf("ls after delete still lists agent:\n%s", stdout)
	}
}

func TestClaimGeneratesANameFromThePool(t *testing.T) {
	ns := env.Namespace(t)
	env.PlayKubelet(t, ns)
	makePool(t, ns, 1)
	stdout, stderr := mustPaddock(t, kubeconfig(t, "default"), "claim", "-n", ns, "--pool", "pool", "-o", "json")
	var out struct{ Claim, Sandbox, PodIP string }
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatalf("claim -o json: %v\n%s", err, stdout)
	}
	if !strings.HasPrefix(out.Claim, "pool-") || !strings.Contains(stderr, "waiting for claim "+out.Claim+" ") {
		t.Errorf("claim %q, stderr %q: want a pool- name that the progress line names", out.Claim, stderr)
	}
	if _, err := getClaim(framework.Context(t, framework.DefaultTimeout), ns, out.Claim); err != nil {
		t.Errorf("claim %s in -n %s: %v", out.Claim, ns, err)
	}
}

func TestPoolListAndScale(t *testing.T) {
	ns := env.Namespace(t)
	kc := kubeconfig(t, ns)
	makePool(t, ns, 0)

	stdout, _ := mustPaddock(t, kc, "pool", "ls")
	if got := []string{field(t, stdout, "pool", "TEMPLATE"), field(t, stdout, "pool", "DESIRED")}; !cmp.Equal(got, []string{"tpl", "0"}) {
		t.Errorf("pool ls TEMPLATE, DESIRED = %v, want [tpl 0]:\n%s", got, stdout)
	}
	mustPaddock(t, kc, "pool", "scale", "pool", "--replicas", "2")
	ctx := framework.Context(t, framework.DefaultTimeout)
	pool := &extensionsv1beta1.SandboxWarmPool{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "pool"}, pool); err != nil {
		t.Fatal(err)
	}
	if pool.Spec.Replicas == nil || *pool.Spec.Replicas != 2 || pool.Spec.TemplateRef.Name != "tpl" {
		t.Errorf("pool spec after scale = %+v, want replicas 2 and the template kept", pool.Spec)
	}
	framework.Eventually(t, func(context.Context) error {
		stdout, _, err := paddock(t, kc, "pool", "ls", "-o", "yaml")
		if err != nil {
			return err
		}
		list := &extensionsv1beta1.SandboxWarmPoolList{}
		if err := yaml.Unmarshal([]byte(stdout), list); err != nil {
			return err
		}
		if len(list.Items) != 1 || list.Items[0].Status.Replicas != 2 {
			return fmt.Errorf("pool ls -o yaml:\n%s\nwant status.replicas 2", stdout)
		}
		return nil
	})
}

func TestBadInputNamesTheProblemAndChangesNothing(t *testing.T) {
	ns := env.Namespace(t)
	kc := kubeconfig(t, ns)
	makePool(t, ns, 0)
	tests := []struct {
		args    []string
		wantErr string
	}{
		{[]string{"claim"}, "--pool is required"},
		{[]string{"claim", "--pool", "pool", "--env", "NOVALUE"}, `--env "NOVALUE": want NAME=VALUE`},
		{[]string{"claim", "--pool", "pool", "--timeout", "0s"}, "--timeout 0s: must be positive"},
		{[]string{"claim", "--pool", "missing"}, fmt.Sprintf("warm pool %q not found in namespace %q", "missing", ns)},
		{[]string{"ls", "-o", "wide"}, `-o/--output "wide": want one of table, json, yaml`},
		{[]string{"get", "x"}, fmt.Sprintf(`claim "x" not found in namespace %q`, ns)},
		{[]string{"get"}, "accepts 1 arg(s), received 0"},
		{[]string{"suspend", "x"}, fmt.Sprintf(`claim "x" not found in namespace %q`, ns)},
		{[]string{"resume", "x"}, fmt.Sprintf(`claim "x" not found in namespace %q`, ns)},
		{[]string{"delete", "x"}, fmt.Sprintf(`claim "x" not found in namespace %q`, ns)},
		{[]string{"exec", "x", "--", "true"}, fmt.Sprintf(`claim "x" not found in namespace %q`, ns)},
		{[]string{"exec", "x", "true"}, `separate the command with "--"`},
		{[]string{"exec", "x", "--"}, `COMMAND is missing after "--"`},
		{[]string{"pool", "scale", "pool"}, "--replicas is required"},
		{[]string{"pool", "scale", "pool", "--replicas", "-1"}, "--replicas -1: must be between 0 and"},
		{[]string{"pool", "scale", "pool", "--replicas", "3000000000"}, "--replicas 3000000000: must be between 0 and 2147483647"},
		{[]string{"pool", "scale", "missing", "--replicas", "1"}, fmt.Sprintf(`warm pool "missing" not found in namespace %q`, ns)},
		{[]string{"ls", "--kubeconfig", "/nonexistent/kubeconfig"}, `--kubeconfig "/nonexistent/kubeconfig"`},
	}
	for _, tc := range tests {
		_, _, err := paddock(t, kc, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("paddock %s: err = %v, want it to contain %q", strings.Join(tc.args, " "), err, tc.wantErr)
		}
	}
	if claims := listClaims(t, ns); len(claims) != 0 {
		t.Errorf("bad input left %d claims behind, want 0", len(claims))
	}
	pool := &extensionsv1beta1.SandboxWarmPool{}
	if err := env.Client.Get(framework.Context(t, framework.DefaultTimeout), client.ObjectKey{Namespace: ns, Name: "pool"}, pool); err != nil || *pool.Spec.Replicas != 0 {
		t.Errorf("pool after bad scale: %v, %v; want replicas still 0", pool.Spec.Replicas, err)
	}
}

func TestCompletionListsClaimsAndPools(t *testing.T) {
	ns := env.Namespace(t)
	kc := kubeconfig(t, ns)
	makePool(t, ns, 0)
	ctx := framework.Context(t, framework.DefaultTimeout)
	framework.MustCreate(t, ctx, env.Client, builder.MakeClaim("first", ns, "pool").Obj())
	framework.MustCreate(t, ctx, env.Client, builder.MakeClaim("second", ns, "pool").Obj())

	for _, verb := range []string{"get", "suspend", "resume", "delete", "exec"} {
		stdout := mustComplete(t, kc, verb, "")
		if diff := cmp.Diff([]string{"first", "second"}, stdout); diff != "" {
			t.Errorf("completing %s CLAIM (-want +got):\n%s", verb, diff)
		}
	}
	if diff := cmp.Diff([]string{"first:", "second:"}, mustComplete(t, kc, "cp", "")); diff != "" {
		t.Errorf("completing cp SRC (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"second:"}, mustComplete(t, kc, "cp", "./local", "se")); diff != "" {
		t.Errorf("completing cp DST (-want +got):\n%s", diff)
	}
	if got := mustComplete(t, kc, "cp", "./lo"); len(got) != 0 {
		t.Errorf("completing a local path offered %v, want the shell's file completion", got)
	}
	if diff := cmp.Diff([]string{"pool"}, mustComplete(t, kc, "claim", "--pool", "")); diff != "" {
		t.Errorf("completing --pool (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"pool"}, mustComplete(t, kc, "pool", "scale", "")); diff != "" {
		t.Errorf("completing pool scale POOL (-want +got):\n%s", diff)
	}
}

// mustComplete runs cobra's __complete as the shell scripts do and returns the candidates.
func mustComplete(t *testing.T, kc string, args ...string) []string {
	t.Helper()
	stdout, _ := mustPaddock(t, kc, append([]string{"__complete"}, args...)...)
	var got []string
	for _, line := range strings.Split(stdout, "\n") {
		if line != "" && !strings.HasPrefix(line, ":") && !strings.HasPrefix(line, "Completion ended") {
			got = append(got, line)
		}
	}
	return got
}

func TestClaimTimeoutDeletesTheClaim(t *testing.T) {
	ns := env.Namespace(t)
	kc := kubeconfig(t, ns)
	makePool(t, ns, 0) // and no kubelet: the claim's sandbox never becomes Ready
	_, stderr, err := paddock(t, kc, "claim", "--pool", "pool", "--name", "stuck", "--timeout", "1s")
	if err == nil || !strings.Contains(err.Error(), "SandboxClaim "+ns+"/stuck") || !strings.Contains(stderr, "waiting for claim stuck") {
		t.Fatalf("err = %v, stderr %q; want a not-Ready error naming the claim after the progress line", err, stderr)
	}
	framework.Eventually(t, func(ctx context.Context) error {
		if _, err := getClaim(ctx, ns, "stuck"); !apierrors.IsNotFound(err) {
			return fmt.Errorf("claim stuck still there after the timeout (err %v)", err)
		}
		return nil
	})
}
