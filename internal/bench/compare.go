package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// rolloutTimeout bounds the wait for the controller Deployment to run a new image.
const rolloutTimeout = 5 * time.Minute

// ParseCompare reads --compare: two controller images, separated by a comma.
func ParseCompare(s string) ([]string, error) {
	images := strings.Split(s, ",")
	if len(images) != 2 || strings.TrimSpace(images[0]) == "" || strings.TrimSpace(images[1]) == "" {
		return nil, fmt.Errorf("--compare %q: give two controller images separated by a comma, like registry/controller:a,registry/controller:b", s)
	}
	return []string{strings.TrimSpace(images[0]), strings.TrimSpace(images[1])}, nil
}

// SetControllerImage points the controller Deployment's container at image and waits until
// every controller Pod runs it and is Ready, and no Pod of an earlier image is left. It returns
// the image the container had before.
func (r *Runner) SetControllerImage(ctx context.Context, image string) (string, error) {
	key := client.ObjectKey{Namespace: r.controller.Namespace, Name: r.controller.Deployment}
	d := &appsv1.Deployment{}
	if err := r.c.Get(ctx, key, d); err != nil {
		return "", fmt.Errorf("reading the controller Deployment %s (check --controller-namespace and --controller-deployment): %w", key, err)
	}
	if len(d.Spec.Template.Spec.Containers) == 0 {
		return "", fmt.Errorf("the controller Deployment %s has no container", key)
	}
	patch := client.MergeFrom(d.DeepCopy())
	c := &d.Spec.Template.Spec.Containers[0]
	previous := c.Image
	c.Image = image
	if err := r.c.Patch(ctx, d, patch); err != nil {
		return previous, fmt.Errorf("setting the image of the controller Deployment %s to %s: %w", key, image, err)
	}
	klog.FromContext(ctx).Info("Rolling the controller out", "deployment", key, "image", image)
	err := wait.PollUntilContextTimeout(ctx, time.Second, rolloutTimeout, true, func(ctx context.Context) (bool, error) {
		return r.rolledOut(ctx, d.Spec.Selector, image)
	})
	if err != nil {
		return previous, fmt.Errorf("the controller Deployment %s did not run %s on every Pod within %s: %w", key, image, rolloutTimeout, err)
	}
	return previous, nil
}

// rolledOut says whether every Pod of the Deployment's selector runs image, is Ready and is not
// being deleted: the old controller is gone and the new one serves.
func (r *Runner) rolledOut(ctx context.Context, selector *metav1.LabelSelector, image string) (bool, error) {
	sel, err := metav1.LabelSelectorAsSelector(selector)
	if err != nil {
		return false, fmt.Errorf("the controller Deployment's selector: %w", err)
	}
	pods := &corev1.PodList{}
	if err := r.c.List(ctx, pods, client.InNamespace(r.controller.Namespace), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return false, nil
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.DeletionTimestamp != nil || !podReady(p) || len(p.Spec.Containers) == 0 || p.Spec.Containers[0].Image != image {
			return false, nil
		}
	}
	return len(pods.Items) > 0, nil
}

// ExecuteCompare runs every scenario once per controller image of --compare, on the same
// cluster, one image after the other, writes each run's files into a/ and b/ under --out and
// compare.md next to them, and puts the Deployment's original image back. It returns the
// comparison as Markdown.
func ExecuteCompare(ctx context.Context, o *Options) (string, error) {
	if err := o.Validate(); err != nil {
		return "", err
	}
	images, err := ParseCompare(o.Compare)
	if err != nil {
		return "", err
	}
	runner, conds, err := newRunner(ctx, o)
	if err != nil {
		return "", err
	}
	var reports [2]*Report
	original := ""
	defer func() {
		if original == "" {
			return
		}
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rolloutTimeout)
		defer cancel()
		if _, err := runner.SetControllerImage(ctx, original); err != nil {
			klog.FromContext(ctx).Error(err, "Putting the controller's original image back")
		}
	}()
	for i, image := range images {
		previous, err := runner.SetControllerImage(ctx, image)
		if original == "" {
			original = previous
		}
		if err != nil {
			return "", err
		}
		c := conds
		c.Time, c.ControllerImage = time.Now().UTC(), image
		reports[i] = &Report{Conditions: c}
		if err := runner.runAll(ctx, o, reports[i], filepath.Join(o.Out, compareDirs[i])); err != nil {
			return "", err
		}
	}
	md := CompareMarkdown(reports[0], reports[1])
	if err := writeFile(filepath.Join(o.Out, "compare.md"), md); err != nil {
		return md, err
	}
	return md, nil
}

// compareDirs are the subdirectories of --out for the two runs of a comparison.
var compareDirs = [2]string{"a", "b"}

// comparedMetric is one row of a comparison: a value of a scenario's result and how to show it.
type comparedMetric struct {
	name   string
	value  func(Result) (float64, bool)
	format func(float64) string
}

// ofObjects is a metric of the scenarios that create claims or Sandboxes: all but runtime ones.
func ofObjects(f func(Result) float64) func(Result) (float64, bool) {
	return func(r Result) (float64, bool) { return f(r), r.Runtime == nil }
}

func ofRuntime(f func(*Runtime) float64) func(Result) (float64, bool) {
	return func(r Result) (float64, bool) {
		if r.Runtime == nil {
			return 0, false
		}
		return f(r.Runtime), true
	}
}

func ofHold(f func(*Hold) float64) func(Result) (float64, bool) {
	return func(r Result) (float64, bool) {
		if r.Hold == nil {
			return 0, false
		}
		return f(r.Hold), true
	}
}

func seconds(v float64) string { return latency(1, v) }

var comparedMetrics = []comparedMetric{
	{"p50", ofObjects(func(r Result) float64 { return r.Latency.P50 }), seconds},
	{"p90", ofObjects(func(r Result) float64 { return r.Latency.P90 }), seconds},
	{"p99", ofObjects(func(r Result) float64 { return r.Latency.P99 }), seconds},
	{"max", ofObjects(func(r Result) float64 { return r.Latency.Max }), seconds},
	{"all Ready", ofObjects(func(r Result) float64 { return r.AllReadySeconds }), seconds},
	{"API writes per object", ofObjects(func(r Result) float64 { return r.WritesPerClaim }), func(v float64) string { return fmt.Sprintf("%.1f", v) }},
	{"exec p50, direct", ofRuntime(func(m *Runtime) float64 { return m.Exec.P50 }), microseconds},
	{"exec p50, routed", ofRuntime(func(m *Runtime) float64 { return m.ExecRouted.P50 }), microseconds},
	{"health p50, routed", ofRuntime(func(m *Runtime) float64 { return m.HealthRouted.P50 }), microseconds},
	{"routed requests/s", ofRuntime(func(m *Runtime) float64 { return m.LoadRouted.PerSecond }), func(v float64) string { return fmt.Sprintf("%.0f", v) }},
	{"RSS settled", ofHold(func(h *Hold) float64 { return h.Settled.RSSBytes }), mebibytes},
	{"RSS after resync", ofHold(func(h *Hold) float64 { return h.AfterResync.RSSBytes }), mebibytes},
	{"CPU while creating", ofHold(func(h *Hold) float64 { return h.CPUCoresCreating }), func(v float64) string { return fmt.Sprintf("%.2f cores", v) }},
	{"probe Ready after restart", ofHold(func(h *Hold) float64 { return h.ProbeReadySeconds }), seconds},
	{"full resync", ofHold(func(h *Hold) float64 {
		if !h.ResyncComplete {
			return 0
		}
		return h.ResyncSeconds
	}), func(v float64) string {
		if v == 0 {
			return "not reached"
		}
		return seconds(v)
	}},
}

// CompareMarkdown puts two runs of the same scenarios side by side: per scenario (matched by
// name) and metric, A's value, B's value and B/A, so below 1 means B is faster or smaller.
func CompareMarkdown(a, b *Report) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "A: %s (measured %s)\n\nB: %s (measured %s)\n\n", orDash(a.Conditions.ControllerImage), a.Conditions.Time.UTC().Format(time.RFC3339),
		orDash(b.Conditions.ControllerImage), b.Conditions.Time.UTC().Format(time.RFC3339))
	sb.WriteString("| scenario | metric | A | B | B/A |\n|---|---|---|---|---|\n")
	byName := map[string]Result{}
	for _, r := range b.Scenarios {
		byName[r.Name] = r
	}
	for _, ra := range a.Scenarios {
		rb, ok := byName[ra.Name]
		if !ok {
			fmt.Fprintf(&sb, "| %s | – | ran | did not run | – |\n", ra.Name)
			continue
		}
		for _, m := range comparedMetrics {
			va, okA := m.value(ra)
			vb, okB := m.value(rb)
			if !okA || !okB {
				continue
			}
			fmt.Fprintf(&sb, "| %s | %s | %s | %s | %s |\n", ra.Name, m.name, m.format(va), m.format(vb), ratio(va, vb))
		}
	}
	return sb.String()
}

// ratio is b/a to two decimals; "–" when a is zero (nothing measured) or either was not measured.
func ratio(a, b float64) string {
	if a == 0 || b == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f", b/a)
}
