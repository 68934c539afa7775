package cluster

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/paddock-dev/paddock/api/e2b"
	"github.com/paddock-dev/paddock/api/egress"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	"github.com/paddock-dev/paddock/internal/devcluster"
	"github.com/paddock-dev/paddock/internal/standin"
	"github.com/paddock-dev/paddock/sdk"
	"github.com/paddock-dev/paddock/test/framework"
)

// testEgressRules drives E2B network.rules end to end with the unmodified e2b SDK
// (client/egressrules.mjs) on paddock dev up's `base` template (env-base on gVisor, trusting the
// egress CA through its pod annotation) and on a copy of it on runc. A sandbox that may reach
// only api.example.test, with a rule adding "Authorization: Bearer <random>", reaches it over
// HTTPS with no CA flag and the stand-in sees the value; example.test and other.test are refused;
// the value is nowhere the sandbox can read and getInfo shows it redacted. A second sandbox plays
// the attacker against the first's egress identity (attacker_egress_test.go). updateNetwork with
// a new value: the next request carries it and the first value's Secret is gone.
func testEgressRules(t *testing.T) {
	ns := namespace(t)
	ctx := framework.Context(t, 12*time.Minute)
	c := paddockClient(t)
	stand := standin.NewClient(filepath.Join(cmp.Or(suite.stateDir, *stateDirFlag), "internet"))
	plan, err := stand.Plan(ctx)
	if err != nil {
		t.Fatalf("the internet stand-in: %v", err)
	}
	api, ok := plan.Lookup("api.example.test")
	example, ok2 := plan.Lookup("example.test")
	if !ok || !ok2 {
		t.Fatalf("the stand-in serves no api.example.test or example.test: %+v", plan.Hosts)
	}

	copyE2BTemplate(t, ctx, c, ns, e2b.DefaultTemplate, false)
	var base extensionsv1beta1.SandboxTemplate
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: e2b.DefaultTemplate}, &base); err != nil {
		t.Fatal(err)
	}
	if rc := base.Spec.PodTemplate.Spec.RuntimeClassName; rc == nil || *rc != devcluster.GVisorRuntimeClass {
		t.Fatalf("paddock dev up's base template has RuntimeClass %v; want %s", rc, devcluster.GVisorRuntimeClass)
	}
	if base.Spec.PodTemplate.ObjectMeta.Annotations[egress.TrustCAAnnotation] != "true" {
		t.Fatalf("paddock dev up's base template does not ask for the egress CA (%s): %v", egress.TrustCAAnnotation, base.Spec.PodTemplate.ObjectMeta.Annotations)
	}
	runc := copyTemplateOnRunc(t, ctx, c, ns, e2b.DefaultTemplate)
	for _, name := range []string{e2b.DefaultTemplate, runc} {
		framework.MustCreate(t, ctx, c, poolOf(ns, name, 1))
	}
	framework.Eventually(t, func(ctx context.Context) error {
		_, err := suite.client.CoreV1().Secrets("paddock-system").Get(ctx, "paddock-egress-ca", metav1.GetOptions{})
		return err
	})

	key, url := e2bAPIKey(t, ctx, c, ns), e2bURL(t, ctx, c)
	dir := e2bClientDir(t)
	env := append(os.Environ(), "E2B_API_URL="+url, "E2B_SANDBOX_URL="+url, "E2B_API_KEY="+key, "E2B_PKG="+e2bSDKs[0])
	paddock, err := sdk.New(suite.restConfig, sdk.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// step runs one step of the script and returns the sandbox ID it printed, if any.
	step := func(t *testing.T, name string, vars ...string) string {
		t.Helper()
		out, err := node(t, ctx, dir, append(append([]string(nil), env...), vars...), "egressrules.mjs", name)
		if err != nil || !strings.Contains(out, "all checks passed") {
			t.Fatalf("egressrules.mjs %s: %v", name, err)
		}
		_, id, _ := strings.Cut(out, "SANDBOX ")
		id, _, _ = strings.Cut(id, "\n")
		return strings.TrimSpace(id)
	}

	for _, tc := range []struct{ runtime, template string }{{"gVisor", e2b.DefaultTemplate}, {"runc", runc}} {
		t.Run("sandbox on "+tc.runtime, func(t *testing.T) {
			waitPoolReady(t, c, ns, tc.template, 1)
			first, second := ruleValue(), ruleValue()
			id := step(t, "create", "E2B_TEMPLATE="+tc.template, "RULE_VALUE="+first)
			if id == "" {
				t.Fatal("egressrules.mjs create printed no sandbox ID")
			}
			sb, run := attachE2B(t, ctx, paddock, ns, id)
			firstSecret := rulesSecret(t, c, ns, id, first)
			waitEgressApplied(t, c, ns, sb.SandboxName())
			curl := func(args string) func(context.Context) (string, error) {
				return func(ctx context.Context) (string, error) { return run(ctx, "curl -sS -m 10 "+args) }
			}

			// HTTPS with no CA flag: the Pod trusts the egress CA (the template's annotation), and
			// the stand-in sees the rule's value on the request.
			// Through the E2B SDK's commands.run, as the README shows, then through sandboxd.
			nonce := hex.EncodeToString(randomBytes(6))
			step(t, "curl", "E2B_SANDBOX_ID="+id, "URL_PATH=/e-"+nonce)
			wantAuthorization(t, ctx, stand, "/e-"+nonce, first)
			expectOutput(t, "https://api.example.test/ with no --cacert", curl("https://api.example.test/a-"+nonce), "hello from api.example.test")
			wantAuthorization(t, ctx, stand, "/a-"+nonce, first)

			// Refused: the hosts allowOut does not list, by name and by address.
			expectOutput(t, "http://example.test/", failing(curl("http://example.test/")), "Could not resolve host")
			expectOutput(t, "https://other.test/", failing(curl("https://other.test/")), "Could not resolve host")
			expectOutput(t, "example.test's address", curl("http://"+example.Addr.String()+"/"), "is not allowed for this sandbox")

			// The value, and the egress CA's key, are nowhere the sandbox can read.
			ca, err := suite.client.CoreV1().Secrets("paddock-system").Get(ctx, "paddock-egress-ca", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			rows := valueHiddenRows(ctx, "sandbox on "+tc.runtime, run, strings.TrimPrefix(first, "Bearer "), keyFragment(ca.Data[corev1.TLSPrivateKeyKey]))
			rows = append(rows, trustRows(ctx, "sandbox on "+tc.runtime, run, ns)...)

			// Another sandbox plays the attacker against this one's egress identity.
			attacker := step(t, "attacker", "E2B_TEMPLATE="+tc.template)
			sbB, runB := attachE2B(t, ctx, paddock, ns, attacker)
			waitEgressApplied(t, c, ns, sbB.SandboxName())
			rows = append(rows, egressIdentityRows(t, ctx, identityTarget{
				from: "sandbox b on " + tc.runtime, run: runB, stand: stand, victimIP: sb.PodIPs()[0], value: first,
				apiIP: api.Addr.String(), allowedIP: example.Addr.String(), node: nodeInternalIP(t, ctx)})...)
			report(t, rows)

			// updateNetwork with a new value: the next requests carry it, the first Secret goes.
			step(t, "update", "E2B_SANDBOX_ID="+id, "RULE_VALUE="+second)
			rulesSecret(t, c, ns, id, second)
			framework.Eventually(t, func(ctx context.Context) error {
				err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: firstSecret}, &corev1.Secret{})
				if !apierrors.IsNotFound(err) {
					return fmt.Errorf("the first rules Secret %s is still there (%v)", firstSecret, err)
				}
				return nil
			})
			framework.Eventually(t, func(ctx context.Context) error {
				path := "/u-" + hex.EncodeToString(randomBytes(6))
				if out, err := run(ctx, "curl -sS -m 10 https://api.example.test"+path); err != nil || !strings.Contains(out, "hello from api.example.test") {
					return fmt.Errorf("https://api.example.test%s = %q, %v", path, out, err)
				}
				return requestCarries(ctx, stand, path, second)
			})
			path := "/n-" + nonce
			expectOutput(t, "https://api.example.test/ after updateNetwork", curl("https://api.example.test"+path), "hello from api.example.test")
			wantAuthorization(t, ctx, stand, path, second)
		})
	}
}

// attachE2B attaches the paddock SDK to E2B sandbox id (a claim of that name) and returns it with
// a function running a shell command in it through sandboxd, as the sandbox's code would.
func attachE2B(t *testing.T, ctx context.Context, paddock *sdk.Client, ns, id string) (*sdk.Sandbox, func(context.Context, string) (string, error)) {
	t.Helper()
	sb, err := paddock.Attach(ctx, ns, id)
	if err != nil {
		t.Fatalf("attaching to E2B sandbox %s: %v", id, err)
	}
	t.Cleanup(sb.Close)
	rt, err := sb.Runtime()
	if err != nil {
		t.Fatal(err)
	}
	return sb, func(ctx context.Context, cmd string) (string, error) {
		res, err := rt.Run(ctx, "sh -c "+shellQuote(cmd))
		if err != nil {
			return "", err
		}
		out := res.Stdout + res.Stderr
		if res.ExitCode != 0 {
			return out, fmt.Errorf("exit code %d: %s", res.ExitCode, strings.TrimSpace(out))
		}
		return out, nil
	}
}

// rulesSecret waits until claim id names its rules Secret (e2b.paddock.dev/rules-secret) holding
// value, owned by the claim, and returns the Secret's name.
func rulesSecret(t *testing.T, c client.Client, ns, id, value string) string {
	t.Helper()
	var name string
	framework.Eventually(t, func(ctx context.Context) error {
		var claim extensionsv1beta1.SandboxClaim
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: id}, &claim); err != nil {
			return err
		}
		name = claim.Annotations[e2b.RulesSecretAnnotation]
		var s corev1.Secret
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &s); err != nil {
			return fmt.Errorf("claim %s's rules Secret %q: %w", id, name, err)
		}
		held := false
		for _, v := range s.Data {
			held = held || string(v) == value
		}
		owned := false
		for _, o := range s.OwnerReferences {
			owned = owned || o.UID == claim.UID
		}
		if !held || !owned {
			return fmt.Errorf("rules Secret %s: value held %v, owned by claim %s %v", name, held, id, owned)
		}
		return nil
	})
	return name
}

// wantAuthorization fails unless the stand-in saw path over HTTPS with Authorization value only.
func wantAuthorization(t *testing.T, ctx context.Context, stand *standin.Client, path, value string) {
	t.Helper()
	if err := requestCarries(ctx, stand, path, value); err != nil {
		t.Error(err)
	}
}

// requestCarries checks that api.example.test saw a request for path, and that every one it saw
// came over HTTPS with Authorization value.
func requestCarries(ctx context.Context, stand *standin.Client, path, value string) error {
	reqs, err := stand.Requests(ctx, "api.example.test")
	if err != nil {
		return err
	}
	var seen []standin.Request
	for _, r := range reqs {
		if r.Path == path {
			seen = append(seen, r)
		}
	}
	if len(seen) == 0 {
		return fmt.Errorf("api.example.test saw no request for %s", path)
	}
	for _, r := range seen {
		if r.Scheme != "https" || r.Header.Get("Authorization") != value {
			return fmt.Errorf("api.example.test saw %s %s with Authorization %q; want https with the rule's value", r.Scheme, path, r.Header.Get("Authorization"))
		}
	}
	return nil
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

// ruleValue is a fresh credential value for a rule.
func ruleValue() string { return "Bearer e2e-" + hex.EncodeToString(randomBytes(16)) }
