package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
)

// writeCounter counts the writes to the objects of one namespace that a watch shows (each
// added, modified or deleted event is one write), by kind and by the field manager that made it.
type writeCounter struct {
	mu     sync.Mutex
	counts map[string]int
}

// count runs until ctx ends.
func (w *writeCounter) count(ctx context.Context, c client.WithWatch, ns string) error {
	w.counts = map[string]int{}
	for _, list := range []client.ObjectList{&agentsv1beta1.SandboxList{}, &corev1.PodList{}, &corev1.ServiceList{}, &corev1.SecretList{}} {
		// Watch from the list's resourceVersion, so that only writes from now on are seen.
		if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
			return err
		}
		kind := fmt.Sprintf("%T", list)
		kind = strings.TrimSuffix(kind[strings.LastIndex(kind, ".")+1:], "List")
		wi, err := c.Watch(ctx, list, client.InNamespace(ns), &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: list.GetResourceVersion()}})
		if err != nil {
			return err
		}
		go func() {
			defer wi.Stop()
			for ev := range wi.ResultChan() {
				if obj, ok := ev.Object.(client.Object); ok {
					w.add(kind + " " + lastManager(obj, ev.Type))
				}
			}
		}()
	}
	return nil
}

func (w *writeCounter) add(key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.counts[key]++
}

// take returns the counts so far and starts again from zero.
func (w *writeCounter) take() (int, string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	total, parts := 0, []string{}
	for _, k := range slices.Sorted(maps.Keys(w.counts)) {
		total += w.counts[k]
		parts = append(parts, fmt.Sprintf("%s %d", k, w.counts[k]))
	}
	w.counts = map[string]int{}
	return total, strings.Join(parts, ", ")
}

// lastManager names who made the write: the field manager of the newest managedFields entry.
func lastManager(obj client.Object, t watch.EventType) string {
	if t == watch.Deleted {
		return "(delete)"
	}
	var newest metav1.ManagedFieldsEntry
	for _, m := range obj.GetManagedFields() {
		if m.Time != nil && (newest.Time == nil || !m.Time.Before(newest.Time)) {
			newest = m
		}
	}
	if newest.Subresource != "" {
		return newest.Manager + "/" + newest.Subresource
	}
	return newest.Manager
}

// measureWrites gives sb an idle timeout, sends one request a second through the router for
// active, stops, and counts the writes to the namespace's Sandbox, Pods, Service and Secrets in
// three phases: the traffic, the wait until the idle controller suspends it, and idle after
// that, while suspended.
func measureWrites(ctx context.Context, c client.WithWatch, url, token string, sb *agentsv1beta1.Sandbox, timeout, active, idle time.Duration) error {
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, agentsv1beta1.IdleTimeoutAnnotation, timeout.String())
	if err := c.Patch(ctx, sb, client.RawPatch("application/merge-patch+json", []byte(patch))); err != nil {
		return err
	}
	// Let the idle controller start the clock (one annotation write) before counting.
	if err := until(ctx, func() bool {
		got := &agentsv1beta1.Sandbox{}
		return c.Get(ctx, client.ObjectKeyFromObject(sb), got) == nil && got.Annotations[agentsv1beta1.LastActivityAnnotation] != ""
	}); err != nil {
		return fmt.Errorf("the idle controller never stamped %s: %w", agentsv1beta1.LastActivityAnnotation, err)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w := &writeCounter{}
	if err := w.count(wctx, c, sb.Namespace); err != nil {
		return err
	}
	requests := 0
	for end := time.Now().Add(active); time.Now().Before(end); requests++ {
		if err := get(ctx, url, sb.Namespace, sb.Name, token); err != nil {
			return fmt.Errorf("request %d of the active phase: %w", requests+1, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
	n, by := w.take()
	fmt.Printf("\nidle timeout %s; %s of traffic (%d requests, one a second): %d writes (%s)\n", timeout, active, requests, n, by)
	quiet := time.Now()
	if err := until(ctx, func() bool {
		got := &agentsv1beta1.Sandbox{}
		return c.Get(ctx, client.ObjectKeyFromObject(sb), got) == nil && got.Annotations[agentsv1beta1.SuspendReasonAnnotation] == agentsv1beta1.SuspendReasonIdle
	}); err != nil {
		return fmt.Errorf("the idle controller never suspended the sandbox: %w", err)
	}
	n, by = w.take()
	fmt.Printf("no traffic until the idle controller suspended it (%s): %d writes (%s)\n", time.Since(quiet).Round(time.Second), n, by)
	// Let the suspension finish (Pod deleted, Suspended reported) before counting the idle time.
	if err := until(ctx, func() bool {
		got, pods := &agentsv1beta1.Sandbox{}, &corev1.PodList{}
		return c.Get(ctx, client.ObjectKeyFromObject(sb), got) == nil &&
			meta.IsStatusConditionTrue(got.Status.Conditions, agentsv1beta1.SandboxConditionSuspended) &&
			c.List(ctx, pods, client.InNamespace(sb.Namespace)) == nil && len(pods.Items) == 0
	}); err != nil {
		return err
	}
	n, by = w.take()
	fmt.Printf("the suspension until its Pod was gone: %d writes (%s)\n", n, by)
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(idle):
	}
	n, by = w.take()
	fmt.Printf("suspended and idle for %s: %d writes (%s)\n", idle, n, by)
	return nil
}
