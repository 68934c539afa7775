package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	"github.com/paddock-dev/paddock/api/e2b"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	"github.com/paddock-dev/paddock/internal/blueprint"
	"github.com/paddock-dev/paddock/test/framework"
)

// e2bTarget is what the E2B rows attack: the front door of the installed router, the victim
// sandbox v and the attacker's own sandbox e (both created through the front door with ns's
// key), and an unclaimed member of the same pool.
type e2bTarget struct {
	api      string // http://<router pod IP>:3000
	domain   string // the router's --e2b-domain; "" when the install serves no Host routing
	ns       string
	key      string // ns's API key, which the attacker does not hold
	otherKey string // the key of the attacker's namespace
	v, e     e2bSandbox
	member   *agentsv1beta1.Sandbox
	vBefore  e2bDetail
	// templateUID is ns's `base` template's UID, the build ID GET /templates shows ns's key.
	templateUID string
}

type e2bSandbox struct{ id, token string }

// namedKey is an API key an attacker sends, and how the table names it.
type namedKey struct{ name, key string }

type e2bDetail struct {
	State string `json:"state"`
	EndAt string `json:"endAt"`
}

// setUpE2BTarget copies paddock dev up's code-interpreter template (env-base's tools, and the
// code interpreter on 49999) into ns as `base` with a pool of 3, creates v and e through the front
// door and waits for the third member to be Ready and unclaimed.
func setUpE2BTarget(t *testing.T, ctx context.Context, c client.Client, ns, outside, routerIP string) *e2bTarget {
	t.Helper()
	copyDevTemplate(t, ctx, c, e2b.InterpreterTemplate, ns, e2b.DefaultTemplate, true)
	framework.MustCreate(t, ctx, c, poolOf(ns, e2b.DefaultTemplate, 3))
	key, otherKey := e2bAPIKey(t, ctx, c, ns), e2bAPIKey(t, ctx, c, outside)
	x := &e2bTarget{api: "http://" + net.JoinHostPort(routerIP, strconv.Itoa(e2b.DefaultPort)), domain: routerE2BDomain(t, ctx),
		ns: ns, key: key, otherKey: otherKey}
	waitPoolReady(t, c, ns, e2b.DefaultTemplate, 3)
	var tpl extensionsv1beta1.SandboxTemplate
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: e2b.DefaultTemplate}, &tpl); err != nil {
		t.Fatal(err)
	}
	x.templateUID = string(tpl.UID)
	x.v, x.e = x.create(t, ctx), x.create(t, ctx)
	x.member = readyE2BMember(t, c, ns)
	x.vBefore = x.detail(t, ctx, x.v.id)
	// The holder of v's token reaches it: the refusals below are of the attacker's requests.
	if o := sendFromHost(ctx, x.data(x.v.id, e2b.EnvdPort, x.v.token, "")); o.status != http.StatusOK {
		t.Fatalf("v's own token through the data plane: %s %s; want 200", o, o.body)
	}
	if o := sendFromHost(ctx, x.interp(x.v.id, x.v.token, "", "")); o.status != http.StatusOK || !strings.Contains(o.body, `"end_of_execution"`) {
		t.Fatalf("v's own token to its code interpreter through the data plane: %s %s; want 200 and a whole execution", o, o.body)
	}
	return x
}

// copyE2BTemplate copies the `base` template paddock dev up made (sandboxd with bash,
// /home/user on a volume, gVisor when present) into ns as name, with or without its volume.
func copyE2BTemplate(t *testing.T, ctx context.Context, c client.Client, ns, name string, volume bool) {
	t.Helper()
	copyDevTemplate(t, ctx, c, e2b.DefaultTemplate, ns, name, volume)
}

// copyDevTemplate copies the E2B template source that paddock dev up made in namespace default
// into ns as name, with or without its volume.
func copyDevTemplate(t *testing.T, ctx context.Context, c client.Client, source, ns, name string, volume bool) {
	t.Helper()
	copyDevTemplateWith(t, ctx, c, source, ns, name, volume, nil)
}

// copyDevTemplateWith is copyDevTemplate with edit applied to the copy before it is created. A
// template changed right after its create may reach the pool controller's cache after the pool
// that names it, whose first members then carry the template as created: a test that needs a
// template unlike dev up's sets it here, not with a later patch.
func copyDevTemplateWith(t *testing.T, ctx context.Context, c client.Client, source, ns, name string, volume bool, edit func(*extensionsv1beta1.SandboxTemplate)) {
	t.Helper()
	var dev extensionsv1beta1.SandboxTemplate
	if err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: source}, &dev); err != nil {
		t.Fatalf("the E2B template %s of paddock dev up: %v", source, err)
	}
	tpl := &extensionsv1beta1.SandboxTemplate{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns,
		Annotations: dev.Annotations}, Spec: *dev.Spec.DeepCopy()}
	if !volume {
		tpl.Spec.VolumeClaimTemplates = nil
		tpl.Spec.PodTemplate.Spec.Containers[0].VolumeMounts = nil
	}
	if edit != nil {
		edit(tpl)
	}
	framework.MustCreate(t, ctx, c, tpl)
}

// routerE2BDomain is the --e2b-domain the installed router serves, or "".
func routerE2BDomain(t *testing.T, ctx context.Context) string {
	t.Helper()
	var d *appsv1.Deployment
	d, err := suite.client.AppsV1().Deployments(routerNamespace).Get(ctx, routerName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the router Deployment: %v", err)
	}
	for _, ctr := range d.Spec.Template.Spec.Containers {
		for _, arg := range ctr.Args {
			if v, ok := strings.CutPrefix(arg, "--e2b-domain="); ok {
				return v
			}
		}
	}
	return ""
}

func (x *e2bTarget) create(t *testing.T, ctx context.Context) e2bSandbox {
	t.Helper()
	var got struct {
		SandboxID       string `json:"sandboxID"`
		EnvdAccessToken string `json:"envdAccessToken"`
	}
	status, body := x.call(ctx, http.MethodPost, "/v2/sandboxes", x.key, `{"templateID":"base","timeout":900}`)
	if status != http.StatusCreated || json.Unmarshal([]byte(body), &got) != nil || got.EnvdAccessToken == "" {
		t.Fatalf("creating an E2B sandbox: %d %s", status, body)
	}
	return e2bSandbox{id: got.SandboxID, token: got.EnvdAccessToken}
}

func (x *e2bTarget) detail(t *testing.T, ctx context.Context, id string) e2bDetail {
	t.Helper()
	var d e2bDetail
	status, body := x.call(ctx, http.MethodGet, "/sandboxes/"+id, x.key, "")
	if status != http.StatusOK || json.Unmarshal([]byte(body), &d) != nil {
		t.Fatalf("GET /sandboxes/%s with its own key: %d %s", id, status, body)
	}
	return d
}

// call sends one control-plane request from the host.
func (x *e2bTarget) call(ctx context.Context, method, path, key, body string) (int, string) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, x.api+path, bytes.NewReader([]byte(body)))
	if err != nil {
		return 0, err.Error()
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set(e2b.APIKeyHeader, key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// control is a control-plane probe with key ("" sends none).
func (x *e2bTarget) control(target, method, path, key, body string) probe {
	h := map[string]string{"Content-Type": "application/json"}
	if key != "" {
		h[e2b.APIKeyHeader] = key
	}
	// Nothing of v's may come back: neither its token nor, to another tenant, its ID in a list.
	return probe{target: "E2B " + target, method: method, url: x.api + path, header: h, body: body,
		secrets: []string{x.v.token, x.e.token}}
}

// data is a data-plane probe for sandbox id and port, by headers (E2B_SANDBOX_URL mode), or by
// Host {port}-{id}.{domain} when host is set.
func (x *e2bTarget) data(id string, port int, token, host string) probe {
	// Process/List answers 200 with the sandbox's processes to whoever gets through.
	h := map[string]string{"Content-Type": "application/json", "Connect-Protocol-Version": "1"}
	if host == "" {
		h[e2b.SandboxIDHeader], h[e2b.SandboxPortHeader] = id, strconv.Itoa(port)
	}
	if token != "" {
		h[e2b.AccessTokenHeader] = token
	}
	p := probe{method: http.MethodPost, url: x.api + e2b.ProbePath, header: h, body: "{}", e2b: true}
	p.host = host
	return p
}

// interp is a data-plane probe of sandbox id's code interpreter (port 49999): a cell that prints
// the user's id runs for whoever gets through. token goes in X-Access-Token, traffic in
// E2b-Traffic-Access-Token (the header the code-interpreter SDK proves the token with on its
// context calls), host as with data.
func (x *e2bTarget) interp(id, token, traffic, host string) probe {
	h := map[string]string{"Content-Type": "application/json"}
	if host == "" {
		h[e2b.SandboxIDHeader], h[e2b.SandboxPortHeader] = id, strconv.Itoa(e2b.InterpreterPort)
	}
	if token != "" {
		h[e2b.AccessTokenHeader] = token
	}
	if traffic != "" {
		h[e2b.TrafficAccessTokenHeader] = traffic
	}
	return probe{method: http.MethodPost, url: x.api + "/execute", header: h, body: `{"code":"import os; os.getuid()"}`, host: host, e2b: true}
}

// interpDirect is a probe of the code interpreter at a sandbox's pod IP, past the router.
func interpDirect(target, ip, token string) probe {
	h := map[string]string{"Content-Type": "application/json"}
	if token != "" {
		h[e2b.AccessTokenHeader] = token
	}
	return probe{target: target, method: http.MethodPost, url: "http://" + net.JoinHostPort(ip, strconv.Itoa(e2b.InterpreterPort)) + "/execute",
		header: h, body: `{"code":"import os; os.getuid()"}`}
}

// interpDirectProbes attack the code interpreters of v and of the unclaimed member by pod IP.
func (x *e2bTarget) interpDirectProbes(ipV string) []probe {
	ipMember := x.member.Status.PodIPs[0]
	return []probe{
		interpDirect("E2B sandbox v's code interpreter 49999 by pod IP, no token", ipV, ""),
		interpDirect("E2B sandbox v's code interpreter 49999 by pod IP, e's token", ipV, x.e.token),
		interpDirect("the unclaimed E2B member's code interpreter 49999 by pod IP, no token", ipMember, ""),
	}
}

// e2bProbes are the attempts every vantage makes on the front door with the keys it may hold.
func (x *e2bTarget) e2bProbes(keys []namedKey, tokenA string) []probe {
	var probes []probe
	v := x.v.id
	for _, k := range keys {
		name, key := k.name, k.key
		list := func(p probe) probe { p.listOK = true; p.secrets = append(p.secrets, v); return p }
		template := func(p probe) probe { p.secrets = append(p.secrets, x.templateUID); return p }
		probes = append(probes,
			list(x.control("list (v1), "+name, http.MethodGet, "/sandboxes", key, "")),
			list(x.control("list (v2, running and paused), "+name, http.MethodGet, "/v2/sandboxes?state=running,paused", key, "")),
			x.control("get v, "+name, http.MethodGet, "/sandboxes/"+v, key, ""),
			x.control("kill v, "+name, http.MethodDelete, "/sandboxes/"+v, key, ""),
			x.control("set v's timeout to 0 (kills it), "+name, http.MethodPost, "/sandboxes/"+v+"/timeout", key, `{"timeout":0}`),
			x.control("pause v, "+name, http.MethodPost, "/sandboxes/"+v+"/pause", key, "{}"),
			x.control("connect to v (v2), "+name, http.MethodPost, "/v2/sandboxes/"+v+"/connect", key, `{"timeout":600}`),
			x.control("connect to v (v1), "+name, http.MethodPost, "/sandboxes/"+v+"/connect", key, `{"timeout":600}`),
			x.control("metrics of v, "+name, http.MethodGet, "/sandboxes/"+v+"/metrics", key, ""),
			// ns's templates: a list of the caller's own namespace's must not show ns's.
			template(list(x.control("list templates, "+name, http.MethodGet, "/templates", key, ""))),
			template(list(x.control("alias "+e2b.DefaultTemplate+", "+name, http.MethodGet, "/templates/aliases/"+e2b.DefaultTemplate, key, ""))),
		)
	}
	withTarget := func(p probe, target string) probe { p.target = "E2B data plane: " + target; return p }
	probes = append(probes,
		withTarget(x.data(v, e2b.EnvdPort, "", ""), "v by headers, no access token"),
		withTarget(x.data(v, e2b.EnvdPort, "made-up-"+rand.String(16), ""), "v by headers, a made-up access token"),
		withTarget(x.data(v, e2b.EnvdPort, x.e.token, ""), "v by headers, e's access token"),
		withTarget(x.data(v, e2b.EnvdPort, tokenA, ""), "v by headers, Paddock sandbox a's token"),
		withTarget(x.data(x.member.Name, e2b.EnvdPort, "", ""), "the unclaimed member by its name, no token"),
		withTarget(x.data(strings.Repeat("a", len(v)), e2b.EnvdPort, x.e.token, ""), "a guessed sandbox ID, e's token"),
	)
	domain := x.domain
	if domain == "" {
		domain = "e2b.invalid" // the install routes no hosts: such a request must not reach a sandbox either
	}
	probes = append(probes,
		withTarget(x.data(v, e2b.EnvdPort, "", fmt.Sprintf("%d-%s.%s", e2b.EnvdPort, v, domain)), "v by Host, no access token"),
		withTarget(x.data(v, e2b.EnvdPort, x.e.token, fmt.Sprintf("%d-%s.%s", e2b.EnvdPort, v, domain)), "v by Host, e's access token"),
		withTarget(x.interp(v, "", "", ""), "v's code interpreter 49999 by headers, no token"),
		withTarget(x.interp(v, x.e.token, "", ""), "v's code interpreter 49999 by headers, e's access token"),
		withTarget(x.interp(v, "", x.e.token, ""), "v's code interpreter 49999 by headers, e's token as E2b-Traffic-Access-Token"),
		withTarget(x.interp(v, tokenA, "", ""), "v's code interpreter 49999 by headers, Paddock sandbox a's token"),
		withTarget(x.interp(v, "", x.e.token, fmt.Sprintf("%d-%s.%s", e2b.InterpreterPort, v, domain)), "v's code interpreter by Host, e's token"),
	)
	return probes
}

// ownerProbes are attempts with v's own key or token that must still fail: an unclaimed member
// or a plain Sandbox named as an E2B sandbox, and ports v does not declare.
func (x *e2bTarget) ownerProbes(tokenMember, sandboxA, tokenA string) []probe {
	withTarget := func(p probe, target string) probe { p.target = target; return p }
	// An unclaimed member's name is not an E2B ID: the routes answer 404 for it.
	idOf := func(name string) string { return strings.ReplaceAll(name, "-", "") }
	probes := []probe{
		x.control("get the unclaimed member with ns's key", http.MethodGet, "/sandboxes/"+x.member.Name, x.key, ""),
		x.control("get the unclaimed member (as an ID) with ns's key", http.MethodGet, "/sandboxes/"+idOf(x.member.Name), x.key, ""),
		x.control("connect to the unclaimed member with ns's key", http.MethodPost, "/v2/sandboxes/"+idOf(x.member.Name)+"/connect", x.key, "{}"),
		x.control("get Paddock sandbox a with ns's key", http.MethodGet, "/sandboxes/"+sandboxA, x.key, ""),
		withTarget(x.data(x.member.Name, e2b.EnvdPort, tokenMember, ""), "E2B data plane: the unclaimed member, its own sandbox token"),
		withTarget(x.data(idOf(x.member.Name), e2b.EnvdPort, tokenMember, ""), "E2B data plane: the unclaimed member (as an ID), its own sandbox token"),
		withTarget(x.data(sandboxA, e2b.EnvdPort, tokenA, ""), "E2B data plane: Paddock sandbox a, its own token"),
		withTarget(x.interp(idOf(x.member.Name), tokenMember, "", ""), "E2B data plane: the unclaimed member's code interpreter (as an ID), its own sandbox token"),
		withTarget(x.data(x.v.id, 9090, x.v.token, ""), "E2B data plane: v's own token, port 9090 (listening, not declared)"),
		withTarget(x.data(x.v.id, 10250, x.v.token, ""), "E2B data plane: v's own token, port 10250 (not declared)"),
	}
	if x.domain != "" {
		probes = append(probes, withTarget(x.data(x.v.id, 9090, x.v.token, fmt.Sprintf("9090-%s.%s", x.v.id, x.domain)),
			"E2B data plane: v by Host, its own token, port 9090 (not declared)"))
	}
	for i := range probes {
		probes[i].e2b = true
	}
	return probes
}

// intact checks what the attempts left: v still runs with the same end, and its own token still
// reaches it; the member is still unclaimed.
func (x *e2bTarget) intact(t *testing.T, ctx context.Context, c client.Client) []attempt {
	t.Helper()
	after := x.detail(t, ctx, x.v.id)
	rows := []attempt{{from: "host", what: "E2B sandbox v is untouched after the attempts",
		result: fmt.Sprintf("state %s, endAt %s (before: %s, %s)", after.State, after.EndAt, x.vBefore.State, x.vBefore.EndAt),
		held:   after == x.vBefore && after.State == e2b.StateRunning}}
	o := sendFromHost(ctx, x.data(x.v.id, e2b.EnvdPort, x.v.token, ""))
	rows = append(rows, attempt{from: "host", what: "E2B sandbox v still answers its own token", result: o.String(), held: o.status == http.StatusOK})
	member := &agentsv1beta1.Sandbox{}
	err := c.Get(ctx, client.ObjectKeyFromObject(x.member), member)
	_, claimed := member.Labels[agentsv1beta1.ClaimUIDLabel]
	rows = append(rows, attempt{from: "host", what: "the unclaimed E2B pool member is still unclaimed",
		result: fmt.Sprintf("err %v, claim label %v", err, claimed), held: err == nil && !claimed})
	return rows
}

// readyE2BMember is a Ready, unclaimed member of ns's E2B pool.
func readyE2BMember(t *testing.T, c client.Client, ns string) *agentsv1beta1.Sandbox {
	t.Helper()
	var member *agentsv1beta1.Sandbox
	framework.EventuallyWithin(t, 3*time.Minute, func(ctx context.Context) error {
		list := &agentsv1beta1.SandboxList{}
		if err := c.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{agentsv1beta1.WarmPoolSandboxLabel: blueprint.PoolHash(e2b.DefaultTemplate)}); err != nil {
			return err
		}
		for i := range list.Items {
			sb := &list.Items[i]
			if len(sb.Status.PodIPs) > 0 &&
				sb.Labels[agentsv1beta1.ClaimUIDLabel] == "" && meta.IsStatusConditionTrue(sb.Status.Conditions, agentsv1beta1.SandboxConditionReady) {
				member = sb
				return nil
			}
		}
		return fmt.Errorf("no Ready, unclaimed member of pool %s/%s among %d Sandboxes", ns, e2b.DefaultTemplate, len(list.Items))
	})
	return member
}

// boundTo is the Sandbox bound to the E2B sandbox id in ns.
func boundTo(t *testing.T, ctx context.Context, c client.Client, ns, id string) *agentsv1beta1.Sandbox {
	t.Helper()
	claim := &extensionsv1beta1.SandboxClaim{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: id}, claim); err != nil {
		t.Fatal(err)
	}
	list := &agentsv1beta1.SandboxList{}
	if err := c.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{agentsv1beta1.ClaimUIDLabel: string(claim.UID)}); err != nil || len(list.Items) != 1 {
		t.Fatalf("Sandboxes bound to E2B sandbox %s: %d (%v); want 1", id, len(list.Items), err)
	}
	return &list.Items[0]
}
