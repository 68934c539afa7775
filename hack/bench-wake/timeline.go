package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
)

// step is one moment of a wake, in the order a wake passes them.
type step int

const (
	stepResumed step = iota
	stepPodCreated
	stepScheduled
	stepRunning
	stepPodReady
	stepSandboxReady
	stepAnswered
	numSteps
)

var stepNames = [numSteps]string{"resume patch", "Pod created", "scheduled", "container running", "Pod Ready", "Sandbox Ready", "answered"}

// timeline holds when this client saw each step, from the moment the request was sent; zero
// means not seen. The watch runs on the same API server as the controller and the router, so
// its lag is theirs too (a few milliseconds on the dev node).
type timeline struct {
	at [numSteps]time.Duration
}

func (t timeline) String() string {
	parts := make([]string, 0, numSteps)
	for s := range numSteps {
		v := "-"
		if t.at[s] > 0 {
			v = t.at[s].Round(time.Millisecond).String()
		}
		parts = append(parts, stepNames[s]+" "+v)
	}
	return t.at[stepAnswered].Round(time.Millisecond).String() + " (" + strings.Join(parts, ", ") + ")"
}

// wakeOnce sends one request to the suspended sb through url and records its timeline.
func wakeOnce(ctx context.Context, c client.WithWatch, url, token string, sb *agentsv1beta1.Sandbox) (timeline, error) {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pods, err := c.Watch(wctx, &corev1.PodList{}, client.InNamespace(sb.Namespace))
	if err != nil {
		return timeline{}, err
	}
	defer pods.Stop()
	sbs, err := c.Watch(wctx, &agentsv1beta1.SandboxList{}, client.InNamespace(sb.Namespace),
		client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("metadata.name", sb.Name)})
	if err != nil {
		return timeline{}, err
	}
	defer sbs.Stop()

	var mu sync.Mutex
	var tl timeline
	start := time.Now()
	mark := func(s step) {
		mu.Lock()
		defer mu.Unlock()
		if tl.at[s] == 0 {
			tl.at[s] = time.Since(start)
		}
	}
	go follow(pods, func(obj any) {
		if pod, ok := obj.(*corev1.Pod); ok {
			observePod(pod, mark)
		}
	})
	go follow(sbs, func(obj any) {
		if got, ok := obj.(*agentsv1beta1.Sandbox); ok {
			if got.Spec.OperatingMode != agentsv1beta1.SandboxOperatingModeSuspended {
				mark(stepResumed)
			}
			if meta.IsStatusConditionTrue(got.Status.Conditions, agentsv1beta1.SandboxConditionReady) {
				mark(stepSandboxReady)
			}
		}
	})
	if err := get(ctx, url, sb.Namespace, sb.Name, token); err != nil {
		return timeline{}, err
	}
	mark(stepAnswered)
	// The watch may deliver the last events after the answer; wait a little for them.
	seen, done := context.WithTimeout(ctx, 5*time.Second)
	defer done()
	_ = until(seen, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return !slices.Contains(tl.at[:], 0)
	})
	mu.Lock()
	defer mu.Unlock()
	return tl, nil
}

// follow hands every object of w's added and modified events to f until w ends.
func follow(w watch.Interface, f func(obj any)) {
	for ev := range w.ResultChan() {
		if ev.Type == watch.Added || ev.Type == watch.Modified {
			f(ev.Object)
		}
	}
}

// observePod marks the steps pod shows. The namespace holds no Pod before a wake, so any Pod
// event is the woken Sandbox's new Pod.
func observePod(pod *corev1.Pod, mark func(step)) {
	mark(stepPodCreated)
	if pod.Spec.NodeName != "" {
		mark(stepScheduled)
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.State.Running != nil {
			mark(stepRunning)
		}
	}
	for _, cond := range pod.Status.Conditions {
		if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
			mark(stepPodReady)
		}
	}
}

// printSteps prints, for each step, the median time from the request and from the step before.
func printSteps(timelines []timeline) {
	fmt.Printf("\n| step | median from the request | median from the step before |\n|---|---|---|\n")
	for s := range numSteps {
		var from, delta []time.Duration
		for _, tl := range timelines {
			if tl.at[s] == 0 {
				continue
			}
			from = append(from, tl.at[s])
			if s > 0 && tl.at[s-1] > 0 {
				delta = append(delta, tl.at[s]-tl.at[s-1])
			}
		}
		fmt.Printf("| %s | %s | %s |\n", stepNames[s], median(from), median(delta))
	}
}

func median(ds []time.Duration) string {
	if len(ds) == 0 {
		return "-"
	}
	slices.Sort(ds)
	return ds[(len(ds)-1)/2].Round(time.Millisecond).String()
}
