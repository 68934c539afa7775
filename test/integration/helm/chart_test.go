// Package helm tests the Helm chart charts/paddock with the helm binary built from tools/go.mod:
// lint, what `helm template` renders for default and other values (compared with the kustomize
// bundles where they overlap), values the schema refuses, and a real `helm install` and
// `helm uninstall` against a real API server.
package helm

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/paddock-dev/paddock/dist"
	"github.com/paddock-dev/paddock/internal/cli"
	"github.com/paddock-dev/paddock/internal/manager"
	"github.com/paddock-dev/paddock/test/framework"
)

const namespace = "paddock-system"

// render runs `helm template` on the chart, CRDs included, with --set style values.
func render(t *testing.T, ns string, set ...string) []*unstructured.Unstructured {
	t.Helper()
	out, err := renderErr(t, ns, set...)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := framework.DecodeManifests([]byte(out))
	if err != nil {
		t.Fatalf("helm template output: %v\n%s", err, out)
	}
	return objs
}

func renderErr(t *testing.T, ns string, set ...string) (string, error) {
	t.Helper()
	args := []string{"template", "paddock", framework.ChartDir(), "--namespace", ns, "--include-crds"}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	return framework.Helm(framework.Context(t, framework.DefaultTimeout), args...)
}

func key(u *unstructured.Unstructured) string {
	return u.GetKind() + " " + u.GetNamespace() + "/" + u.GetName()
}

func find(objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	for _, u := range objs {
		if u.GetKind() == kind && u.GetName() == name {
			return u
		}
	}
	return nil
}

func mustFind(t *testing.T, objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	t.Helper()
	u := find(objs, kind, name)
	if u == nil {
		t.Fatalf("the chart rendered no %s %s", kind, name)
	}
	return u
}

func convert[T any](t *testing.T, u *unstructured.Unstructured) *T {
	t.Helper()
	obj := new(T)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, obj, true); err != nil {
		t.Fatalf("%s does not decode strictly: %v", key(u), err)
	}
	return obj
}

func controller(t *testing.T, objs []*unstructured.Unstructured) corev1.Container {
	t.Helper()
	d := convert[appsv1.Deployment](t, mustFind(t, objs, "Deployment", "paddock-controller"))
	return d.Spec.Template.Spec.Containers[0]
}

// chartOnlyLabels are the labels the chart adds to every object that the kustomize bundle has not.
var chartOnlyLabels = []string{"helm.sh/chart", "app.kubernetes.io/instance", "app.kubernetes.io/managed-by", "app.kubernetes.io/part-of"}

// withoutChartLabels drops the chart's bookkeeping labels, at the top and on a pod template.
func withoutChartLabels(u *unstructured.Unstructured) *unstructured.Unstructured {
	u = u.DeepCopy()
	strip := func(fields ...string) {
		labels, _, _ := unstructured.NestedStringMap(u.Object, fields...)
		for _, l := range chartOnlyLabels {
			delete(labels, l)
		}
		if len(labels) == 0 {
			unstructured.RemoveNestedField(u.Object, fields...)
		} else {
			_ = unstructured.SetNestedStringMap(u.Object, labels, fields...)
		}
	}
	strip("metadata", "labels")
	strip("spec", "template", "metadata", "labels")
	return u
}

// asChartRendersIt adds to a kustomize object the two things the chart states and kustomize
// leaves out: the app.kubernetes.io/name label on every object, and the image pull policy,
// which the API server would default to IfNotPresent anyway.
func asChartRendersIt(u *unstructured.Unstructured, name string) *unstructured.Unstructured {
	u = u.DeepCopy()
	if u.GetKind() == "CustomResourceDefinition" {
		return u // crds/ is copied verbatim
	}
	labels := u.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels["app.kubernetes.io/name"] = name
	u.SetLabels(labels)
	if u.GetKind() == "Deployment" {
		containers, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
		containers[0].(map[string]any)["imagePullPolicy"] = "IfNotPresent"
		_ = unstructured.SetNestedSlice(u.Object, containers, "spec", "template", "spec", "containers")
	}
	return u
}

func stderrOf(err error) string {
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return string(exit.Stderr)
	}
	return ""
}

// TestLint runs helm lint in strict mode with the defaults and with every optional part on.
func TestLint(t *testing.T) {
	ctx := framework.Context(t, framework.DefaultTimeout)
	for _, set := range []string{"", "router.enabled=true,router.authzMode=scoped-token,metrics.serviceMonitor.enabled=true,tracing.enabled=true,extensions=false"} {
		args := []string{"lint", "--strict", framework.ChartDir()}
		if set != "" {
			args = append(args, "--set", set)
		}
		out, err := framework.Helm(ctx, args...)
		if err != nil {
			t.Errorf("helm lint --set %q: %v\n%s", set, err, out)
		}
	}
}

// TestDefaultsMatchBundle proves the default values install what dist/paddock.yaml installs:
// every object of the bundle but the Namespace (helm install --create-namespace makes it) is
// rendered, equal but for the chart's labels, and the chart renders nothing else.
func TestDefaultsMatchBundle(t *testing.T) {
	bundle, err := cli.ParseBundle(dist.Bundle)
	if err != nil {
		t.Fatal(err)
	}
	chart := render(t, namespace)
	var wantKeys, gotKeys []string
	for _, want := range bundle {
		if want.GetKind() == "Namespace" {
			continue
		}
		wantKeys = append(wantKeys, key(want))
		got := find(chart, want.GetKind(), want.GetName())
		if got == nil {
			continue
		}
		want = asChartRendersIt(want, "paddock-controller")
		if diff := cmp.Diff(want.Object, withoutChartLabels(got).Object); diff != "" {
			t.Errorf("%s differs from dist/paddock.yaml (-bundle +chart):\n%s", key(want), diff)
		}
	}
	for _, u := range chart {
		gotKeys = append(gotKeys, key(u))
	}
	slices.Sort(wantKeys)
	slices.Sort(gotKeys)
	if diff := cmp.Diff(wantKeys, gotKeys); diff != "" {
		t.Errorf("objects of the chart differ from dist/paddock.yaml (-bundle +chart):\n%s", diff)
	}
}

// TestRBACIsGenerated checks the chart's ClusterRoles carry exactly the rules controller-gen
// generated under config/rbac, in any namespace and with the extensions on or off.
func TestRBACIsGenerated(t *testing.T) {
	generated := func(file string) []rbacv1.PolicyRule {
		data, err := os.ReadFile(filepath.Join(framework.RepoRoot(), "config", "rbac", file))
		if err != nil {
			t.Fatal(err)
		}
		var role rbacv1.ClusterRole
		if err := sigsyaml.UnmarshalStrict(data, &role); err != nil {
			t.Fatalf("config/rbac/%s: %v", file, err)
		}
		return role.Rules
	}
	core, ext := generated("core/role.yaml"), generated("extensions/role.yaml")

	objs := render(t, "elsewhere")
	rules := func(objs []*unstructured.Unstructured, name string) []rbacv1.PolicyRule {
		return convert[rbacv1.ClusterRole](t, mustFind(t, objs, "ClusterRole", name)).Rules
	}
	if diff := cmp.Diff(core, rules(objs, "paddock-controller")); diff != "" {
		t.Errorf("ClusterRole paddock-controller differs from config/rbac/core/role.yaml (-generated +chart):\n%s", diff)
	}
	if diff := cmp.Diff(ext, rules(objs, "paddock-controller-extensions")); diff != "" {
		t.Errorf("ClusterRole paddock-controller-extensions differs from config/rbac/extensions/role.yaml (-generated +chart):\n%s", diff)
	}
	for _, kind := range []string{"ClusterRoleBinding", "RoleBinding"} {
		for _, u := range objs {
			if u.GetKind() != kind {
				continue
			}
			b := convert[rbacv1.ClusterRoleBinding](t, u)
			if b.Subjects[0].Namespace != "elsewhere" {
				t.Errorf("%s binds the ServiceAccount of namespace %q, want the release namespace %q", key(u), b.Subjects[0].Namespace, "elsewhere")
			}
		}
	}

	coreOnly := render(t, namespace, "extensions=false")
	for _, name := range []string{"paddock-controller-extensions"} {
		if u := find(coreOnly, "ClusterRole", name); u != nil {
			t.Errorf("extensions=false still renders ClusterRole %s", name)
		}
		if u := find(coreOnly, "ClusterRoleBinding", name); u != nil {
			t.Errorf("extensions=false still renders ClusterRoleBinding %s", name)
		}
	}
	if diff := cmp.Diff(core, rules(coreOnly, "paddock-controller")); diff != "" {
		t.Errorf("extensions=false: ClusterRole paddock-controller differs from config/rbac/core/role.yaml (-generated +chart):\n%s", diff)
	}
}

// TestCRDsAreGenerated checks the chart's CRDs are the ones in config/crd, byte for byte.
func TestCRDsAreGenerated(t *testing.T) {
	var want []string
	for _, dir := range []string{"core", "extensions"} {
		files, err := filepath.Glob(filepath.Join(framework.RepoRoot(), "config", "crd", dir, "*_*.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, files...)
	}
	// Sandbox, SandboxTemplate, SandboxWarmPool, SandboxClaim and SandboxSnapshot.
	if len(want) != 5 {
		t.Fatalf("config/crd holds %d CRD files, want 5: %v", len(want), want)
	}
	for _, path := range want {
		generated, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		copied, err := os.ReadFile(filepath.Join(framework.ChartDir(), "crds", filepath.Base(path)))
		if err != nil {
			t.Errorf("the chart lacks CRD %s (run make generate): %v", filepath.Base(path), err)
			continue
		}
		if diff := cmp.Diff(string(generated), string(copied)); diff != "" {
			t.Errorf("charts/paddock/crds/%s differs from %s; run make generate:\n%s", filepath.Base(path), path, diff)
		}
	}
}

// TestValues renders non-default values and checks each reaches the object it configures.
func TestValues(t *testing.T) {
	objs := render(t, "agents",
		"image.repository=registry.test/paddock", "image.tag=v9", "image.pullPolicy=Always",
		"replicas=2", "leaderElect=true", "extensions=false",
		"kubeAPIQPS=50", "kubeAPIBurst=100", "clusterDomain=corp.example",
		"tracing.enabled=true", "tracing.endpoint=otel-collector.observability:4317", "tracing.insecure=true",
		"claimObservabilityAnnotations=true",
		"extraArgs={--sandbox-concurrent-workers=200,--cache-label-selectors}",
		"extraEnv[0].name=LOG_FORMAT", "extraEnv[0].value=json",
		"resources.requests.cpu=1", "resources.limits.memory=2Gi",
		"nodeSelector.pool=system", "tolerations[0].key=dedicated", "tolerations[0].operator=Exists",
		"priorityClassName=system-cluster-critical", "podAnnotations.team=agents",
		"metrics.port=9443", "sandboxdImage.repository=registry.test/sandbox", "sandboxdImage.tag=v9",
	)
	d := convert[appsv1.Deployment](t, mustFind(t, objs, "Deployment", "paddock-controller"))
	c := d.Spec.Template.Spec.Containers[0]
	wantArgs := []string{
		"--leader-elect=true", "--sandboxd-image=registry.test/sandbox:v9", "--metrics-bind-address=:9443", "--kube-api-qps=50", "--kube-api-burst=100",
		"--cluster-domain=corp.example", "--enable-tracing", "--claim-observability-annotations", "--router-namespace=agents",
		"--sandbox-concurrent-workers=200", "--cache-label-selectors",
	}
	if diff := cmp.Diff(wantArgs, c.Args); diff != "" {
		t.Errorf("controller args (-want +got):\n%s", diff)
	}
	wantEnv := []corev1.EnvVar{
		{Name: "OTEL_EXPORTER_OTLP_ENDPOINT", Value: "otel-collector.observability:4317"},
		{Name: "OTEL_EXPORTER_OTLP_INSECURE", Value: "true"},
		{Name: "LOG_FORMAT", Value: "json"},
	}
	if diff := cmp.Diff(wantEnv, c.Env); diff != "" {
		t.Errorf("controller env (-want +got):\n%s", diff)
	}
	got := map[string]string{
		"image":             c.Image,
		"pullPolicy":        string(c.ImagePullPolicy),
		"replicas":          fmt.Sprint(*d.Spec.Replicas),
		"cpu request":       c.Resources.Requests.Cpu().String(),
		"memory limit":      c.Resources.Limits.Memory().String(),
		"nodeSelector":      fmt.Sprint(d.Spec.Template.Spec.NodeSelector),
		"priorityClassName": d.Spec.Template.Spec.PriorityClassName,
		"pod annotation":    d.Spec.Template.Annotations["team"],
		"metrics port":      fmt.Sprint(c.Ports[0].ContainerPort),
	}
	want := map[string]string{
		"image":             "registry.test/paddock:v9",
		"pullPolicy":        "Always",
		"replicas":          "2",
		"cpu request":       "1",
		"memory limit":      "2Gi",
		"nodeSelector":      "map[pool:system]",
		"priorityClassName": "system-cluster-critical",
		"pod annotation":    "agents",
		"metrics port":      "9443",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Deployment fields (-want +got):\n%s", diff)
	}
	wantTolerations := []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists}}
	if diff := cmp.Diff(wantTolerations, d.Spec.Template.Spec.Tolerations); diff != "" {
		t.Errorf("tolerations (-want +got):\n%s", diff)
	}
	svc := convert[corev1.Service](t, mustFind(t, objs, "Service", "paddock-controller-metrics"))
	if svc.Spec.Ports[0].Port != 9443 || svc.Namespace != "agents" {
		t.Errorf("metrics Service = %s/%s port %d, want agents/… port 9443", svc.Namespace, svc.Name, svc.Spec.Ports[0].Port)
	}
	if u := find(objs, "ServiceMonitor", "paddock-controller"); u != nil {
		t.Errorf("a ServiceMonitor is rendered although metrics.serviceMonitor.enabled is false")
	}
	for _, name := range []string{"paddock-router", "sandbox-router-svc"} {
		for _, u := range objs {
			if u.GetName() == name {
				t.Errorf("router.enabled is false but the chart renders %s", key(u))
			}
		}
	}
}

// TestLeaderElectOff checks leaderElect=false reaches the command line.
// TestLeaderElectOff also turns injection off: no --sandboxd-image without a repository.
func TestLeaderElectOff(t *testing.T) {
	c := controller(t, render(t, namespace, "leaderElect=false", "sandboxdImage.repository="))
	if diff := cmp.Diff([]string{"--leader-elect=false", "--extensions"}, c.Args); diff != "" {
		t.Errorf("args with leaderElect=false and no sandboxd image (-want +got):\n%s", diff)
	}
}

// TestServiceMonitor checks the ServiceMonitor appears only when enabled and scrapes the metrics
// Service's port.
func TestServiceMonitor(t *testing.T) {
	objs := render(t, namespace, "metrics.serviceMonitor.enabled=true", "metrics.serviceMonitor.interval=15s",
		"metrics.serviceMonitor.labels.release=kube-prometheus")
	sm := mustFind(t, objs, "ServiceMonitor", "paddock-controller")
	if sm.GetAPIVersion() != "monitoring.coreos.com/v1" {
		t.Errorf("ServiceMonitor apiVersion = %q, want monitoring.coreos.com/v1", sm.GetAPIVersion())
	}
	// The Prometheus Operator's own Go types reject a misspelt or misplaced field.
	typed := convert[monitoringv1.ServiceMonitor](t, sm)
	if typed.Spec.NamespaceSelector.MatchNames[0] != namespace {
		t.Errorf("ServiceMonitor looks in namespaces %v, want [%s]", typed.Spec.NamespaceSelector.MatchNames, namespace)
	}
	svc := mustFind(t, objs, "Service", "paddock-controller-metrics")
	selector, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
	for k, v := range selector {
		if svc.GetLabels()[k] != v {
			t.Errorf("ServiceMonitor selects %s=%s, which the metrics Service (labels %v) lacks", k, v, svc.GetLabels())
		}
	}
	endpoints, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	wantEndpoints := []any{map[string]any{"port": "metrics", "path": "/metrics", "interval": "15s", "scheme": "https",
		"bearerTokenFile": "/var/run/secrets/kubernetes.io/serviceaccount/token", "tlsConfig": map[string]any{"insecureSkipVerify": true}}}
	if diff := cmp.Diff(wantEndpoints, endpoints); diff != "" {
		t.Errorf("ServiceMonitor endpoints (-want +got):\n%s", diff)
	}
	if sm.GetLabels()["release"] != "kube-prometheus" {
		t.Errorf("ServiceMonitor labels = %v, want release=kube-prometheus among them", sm.GetLabels())
	}
}

// TestRouterMatchesKustomize renders the router in each authz mode and compares it with
// config/router and its components, built by the pinned kustomize that renders dist/.
func TestRouterMatchesKustomize(t *testing.T) {
	kustomize, err := framework.KustomizeBinary()
	if err != nil {
		t.Fatal(err)
	}
	for mode, component := range map[string]string{"allow-all": "allow-all", "tokenreview": "", "scoped-token": "scoped-token"} {
		t.Run(mode, func(t *testing.T) {
			// kustomize takes no absolute paths, so the kustomization names config/router relative
			// to its own directory.
			dir := t.TempDir()
			rel := func(path ...string) string {
				r, err := filepath.Rel(dir, filepath.Join(append([]string{framework.RepoRoot(), "config", "router"}, path...)...))
				if err != nil {
					t.Fatal(err)
				}
				return r
			}
			kustomization := "resources:\n- " + rel() + "\n"
			if component != "" {
				kustomization += "components:\n- " + rel("components", component) + "\n"
			}
			if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(kustomization), 0o644); err != nil {
				t.Fatal(err)
			}
			out, err := exec.Command(kustomize, "build", dir).Output()
			if err != nil {
				t.Fatalf("kustomize build %s: %v\n%s", dir, err, stderrOf(err))
			}
			want, err := framework.DecodeManifests(out)
			if err != nil {
				t.Fatal(err)
			}
			matchKustomize(t, render(t, namespace, "router.enabled=true", "router.authzMode="+mode), want, "paddock-router", nil)
		})
	}
}

// matchKustomize checks that the chart's objects of component name (its app.kubernetes.io/name
// label) are exactly the kustomize objects want, each as the chart renders it (adjust, when set,
// says what else the values change).
func matchKustomize(t *testing.T, chart, want []*unstructured.Unstructured, name string, adjust func(*unstructured.Unstructured)) {
	t.Helper()
	var got, wantKeys []string
	for _, u := range chart {
		if u.GetLabels()["app.kubernetes.io/name"] == name {
			got = append(got, key(u))
		}
	}
	for _, w := range want {
		wantKeys = append(wantKeys, key(w))
		c := find(chart, w.GetKind(), w.GetName())
		if c == nil {
			continue
		}
		w = asChartRendersIt(w, name)
		if adjust != nil {
			adjust(w)
		}
		if diff := cmp.Diff(w.Object, withoutChartLabels(c).Object); diff != "" {
			t.Errorf("%s differs from kustomize (-kustomize +chart):\n%s", key(w), diff)
		}
	}
	slices.Sort(wantKeys)
	slices.Sort(got)
	if diff := cmp.Diff(wantKeys, got); diff != "" {
		t.Errorf("%s objects differ from kustomize (-kustomize +chart):\n%s", name, diff)
	}
}

// TestEgressMatchesKustomize: egress.enabled renders the objects of dist/paddock-egress.yaml,
// the same but for the cluster ranges and the image tag the values give, and the controller
// admits the egress ports; without it, nothing of paddock-egress is rendered.
func TestEgressMatchesKustomize(t *testing.T) {
	want, err := framework.DecodeManifests(dist.EgressBundle)
	if err != nil {
		t.Fatal(err)
	}
	const cidrs = "198.18.0.0/24,198.19.128.0/17"
	chart := render(t, namespace, "egress.enabled=true", "egress.clusterCIDRs={"+cidrs+"}", "egress.image.tag=dev")
	matchKustomize(t, chart, want, "paddock-egress", func(w *unstructured.Unstructured) {
		if w.GetKind() == "DaemonSet" {
			containers, _, _ := unstructured.NestedSlice(w.Object, "spec", "template", "spec", "containers")
			ctr := containers[0].(map[string]any)
			ctr["imagePullPolicy"] = "IfNotPresent"
			args := ctr["args"].([]any)
			for i, a := range args {
				if strings.HasPrefix(a.(string), "--cluster-cidrs=") {
					args[i] = "--cluster-cidrs=" + cidrs
				}
			}
			_ = unstructured.SetNestedSlice(w.Object, containers, "spec", "template", "spec", "containers")
		}
	})
	ds := convert[appsv1.DaemonSet](t, mustFind(t, chart, "DaemonSet", "paddock-egress"))
	pod := ds.Spec.Template.Spec
	sc := pod.Containers[0].SecurityContext
	if !pod.HostNetwork || len(pod.Containers[0].Ports) != 0 || sc == nil || sc.Capabilities == nil ||
		!slices.Equal(sc.Capabilities.Add, []corev1.Capability{"NET_ADMIN"}) || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) ||
		sc.Privileged != nil && *sc.Privileged {
		t.Errorf("the DaemonSet's pod: hostNetwork %v, ports %v, security %+v; want the host network, no port, NET_ADMIN alone", pod.HostNetwork, pod.Containers[0].Ports, sc)
	}
	nsObj := mustFind(t, chart, "Namespace", "paddock-egress")
	if nsObj.GetLabels()["pod-security.kubernetes.io/enforce"] != "privileged" {
		t.Errorf("namespace paddock-egress labels %v; want Pod Security level privileged, which admits the host network", nsObj.GetLabels())
	}
	ctrl := convert[appsv1.Deployment](t, mustFind(t, chart, "Deployment", "paddock-controller"))
	if !slices.Contains(ctrl.Spec.Template.Spec.Containers[0].Args, "--sandbox-egress-proxy-ports=15001,15053") {
		t.Errorf("controller args %v; want --sandbox-egress-proxy-ports=15001,15053", ctrl.Spec.Template.Spec.Containers[0].Args)
	}
	for _, u := range render(t, namespace) {
		if u.GetLabels()["app.kubernetes.io/name"] == "paddock-egress" {
			t.Errorf("the default values render %s; egress is opt-in", key(u))
		}
	}
}

// TestSchemaRefusesBadValues checks that wrong values fail the render with an error that names
// the value, instead of rendering a broken install.
func TestSchemaRefusesBadValues(t *testing.T) {
	for _, tc := range []struct {
		set  []string
		want string // part of the error
	}{
		{[]string{"replicas=-1"}, "/replicas"},
		{[]string{"kubeAPIBurst=0"}, "/kubeAPIBurst"},
		{[]string{"kubeAPIQPS=fast"}, "/kubeAPIQPS"},
		{[]string{"image.pullPolicy=Sometimes"}, "/image/pullPolicy"},
		{[]string{"router.authzMode=open"}, "/router/authzMode"},
		{[]string{"extraArgs={workers=3}"}, "/extraArgs/0"},
		{[]string{"metrics.serviceMonitor.interval=often"}, "/metrics/serviceMonitor/interval"},
		{[]string{"leaderElection=false"}, "leaderElection"},
		{[]string{"extraEnv[0].name=GOMAXPROCS", "extraEnv[0].value=2"}, "/extraEnv/0/value"},
		{[]string{"metrics.serviceMonitor.enabled=true", "metrics.service.enabled=false"}, "metrics.service.enabled=true"},
		// The router lists every Secret of the API-key namespace: never the release's.
		{[]string{"router.enabled=true", "router.e2b.apiKeyNamespace=" + namespace}, "must not be the release namespace"},
		{[]string{"router.enabled=true", "router.e2b.apiKeyNamespace="}, "/router/e2b/apiKeyNamespace"},
		{[]string{"egress.enabled=true"}, "egress.clusterCIDRs is required"},
		{[]string{"egress.enabled=true", "egress.clusterCIDRs={198.18.0.0/24}", "egress.namespace=" + namespace}, "egress.namespace must not be the release namespace"},
		{[]string{"egress.proxyPort=0"}, "/egress/proxyPort"},
		{[]string{"imageConfig.registryMirrors[0].registry=127.0.0.1:5001", "imageConfig.registryMirrors[0].url=198.18.255.1:5001"}, "/imageConfig/registryMirrors/0/url"},
		{[]string{"imageConfig.registryMirrors[0].registry=https://registry.test", "imageConfig.registryMirrors[0].url=https://mirror.test"}, "/imageConfig/registryMirrors/0/registry"},
		{[]string{"imageConfig.registryMirrors[0].registry=registry.test"}, "url"},
		{[]string{"imageConfig.mirrorCredentialsSecret=registry-reader"}, "imageConfig.mirrorCredentialsSecret needs imageConfig.registryMirrors"},
	} {
		out, err := renderErr(t, namespace, tc.set...)
		if err == nil {
			t.Errorf("--set %v rendered without error, want one naming %q:\n%s", tc.set, tc.want, out)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("--set %v failed with %v\nwant the error to name %q", tc.set, err, tc.want)
		}
	}
}

// helmInstall installs the chart into ns of the test's API server and returns the kubeconfig.
func helmInstall(ctx context.Context, t *testing.T, kubeconfig, release, ns string, set ...string) {
	t.Helper()
	args := []string{"install", release, framework.ChartDir(), "--kubeconfig", kubeconfig, "--namespace", ns, "--create-namespace"}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	if out, err := framework.Helm(ctx, args...); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
}

// TestSnapshotsMatchKustomize: snapshots.enabled renders the objects of dist/paddock-snapshots.yaml
// (config/snapshots), with the repository in the policy's parameter, and configures the
// controller with the same repository; off, none of them and no snapshot flag.
func TestSnapshotsMatchKustomize(t *testing.T) {
	want, err := framework.DecodeManifests(dist.SnapshotsBundle)
	if err != nil {
		t.Fatal(err)
	}
	chart := render(t, namespace, "snapshots.enabled=true", "snapshots.repository=reg.example:5000/snaps", "snapshots.runsc=/opt/gvisor/runsc")
	for _, w := range want {
		got := find(chart, w.GetKind(), w.GetName())
		if got == nil {
			t.Errorf("the chart renders no %s", key(w))
			continue
		}
		w = asChartRendersIt(w, "paddock-controller")
		if w.GetKind() == "ConfigMap" {
			_ = unstructured.SetNestedField(w.Object, "reg.example:5000/snaps", "data", "repository")
		}
		if diff := cmp.Diff(w.Object, withoutChartLabels(got).Object); diff != "" {
			t.Errorf("%s differs from kustomize (-kustomize +chart):\n%s", key(w), diff)
		}
	}
	d := convert[appsv1.Deployment](t, mustFind(t, chart, "Deployment", "paddock-controller"))
	args := d.Spec.Template.Spec.Containers[0].Args
	for _, flag := range []string{"--snapshot-repository=reg.example:5000/snaps", "--snapshot-capture-namespace=paddock-snapshots", "--snapshot-runsc=/opt/gvisor/runsc",
		"--snapshot-capture-image=ghcr.io/paddock-dev/paddock-snapshot:dev"} {
		if !slices.Contains(args, flag) {
			t.Errorf("controller args %q lack %s", args, flag)
		}
	}
	for _, u := range render(t, namespace) {
		if strings.Contains(u.GetName(), "snapshot") && u.GetKind() != "CustomResourceDefinition" {
			t.Errorf("snapshots off renders %s", key(u))
		}
	}
	if _, err := renderErr(t, namespace, "snapshots.enabled=true"); err == nil || !strings.Contains(err.Error(), "snapshots.repository is required") {
		t.Errorf("snapshots without a repository: error %v, want the value named", err)
	}
}

// TestImageConfigMirror: imageConfig.registryMirrors and imageConfig.mirrorCredentialsSecret reach
// the controller as --image-config-registry-mirror (which the controller's own flag parsing
// reads back to the same mirrors) and --image-config-registry-mirror-credentials naming the key
// of the Secret mounted read-only; unset, neither flag nor volume is rendered.
func TestImageConfigMirror(t *testing.T) {
	objs := render(t, namespace,
		"imageConfig.registryMirrors[0].registry=127.0.0.1:5001", "imageConfig.registryMirrors[0].url=http://198.18.255.1:5001",
		"imageConfig.registryMirrors[1].registry=registry.test", "imageConfig.registryMirrors[1].url=https://mirror.test",
		"imageConfig.mirrorCredentialsSecret=registry-reader")
	d := convert[appsv1.Deployment](t, mustFind(t, objs, "Deployment", "paddock-controller"))
	c := d.Spec.Template.Spec.Containers[0]
	var mirror, creds string
	for _, a := range c.Args {
		if v, ok := strings.CutPrefix(a, "--image-config-registry-mirror="); ok {
			mirror = v
		}
		if v, ok := strings.CutPrefix(a, "--image-config-registry-mirror-credentials="); ok {
			creds = v
		}
	}
	o := manager.NewOptions()
	fs := flag.NewFlagSet("paddock-controller", flag.ContinueOnError)
	o.AddFlags(fs)
	if err := fs.Parse([]string{"--image-config-registry-mirror=" + mirror}); err != nil {
		t.Fatalf("the controller refuses the rendered --image-config-registry-mirror=%s: %v", mirror, err)
	}
	if got, want := o.ImageConfigMirrors.String(), "127.0.0.1:5001=http://198.18.255.1:5001,registry.test=https://mirror.test"; got != want {
		t.Errorf("rendered --image-config-registry-mirror=%s reads as %s, want %s", mirror, got, want)
	}
	wantVolumes := []corev1.Volume{{Name: "image-config-mirror", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "registry-reader"}}}}
	if diff := cmp.Diff(wantVolumes, d.Spec.Template.Spec.Volumes); diff != "" {
		t.Errorf("controller volumes (-want +got):\n%s", diff)
	}
	if len(c.VolumeMounts) != 1 || !c.VolumeMounts[0].ReadOnly || c.VolumeMounts[0].Name != "image-config-mirror" ||
		creds != c.VolumeMounts[0].MountPath+"/"+corev1.DockerConfigJsonKey {
		t.Errorf("--image-config-registry-mirror-credentials=%s with mounts %+v, want the %s key of the Secret's read-only mount", creds, c.VolumeMounts, corev1.DockerConfigJsonKey)
	}

	plain := convert[appsv1.Deployment](t, mustFind(t, render(t, namespace), "Deployment", "paddock-controller"))
	for _, a := range plain.Spec.Template.Spec.Containers[0].Args {
		if strings.HasPrefix(a, "--image-config-registry-mirror") {
			t.Errorf("default values render %s", a)
		}
	}
	if len(plain.Spec.Template.Spec.Volumes) != 0 || len(plain.Spec.Template.Spec.Containers[0].VolumeMounts) != 0 {
		t.Errorf("default values render volumes %+v", plain.Spec.Template.Spec.Volumes)
	}
}
