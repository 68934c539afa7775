package devcluster

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
)

// KWOKTaintKey taints fake nodes so that only pods that tolerate it (and so expect no real
// container) land there.
const KWOKTaintKey = "kwok.x-k8s.io/node"

// KWOKNodeName names the i-th fake node.
func KWOKNodeName(i int) string { return fmt.Sprintf("paddock-kwok-%d", i) }

// kwokCapacity is a fake node's capacity, holding maxPods Pods.
func kwokCapacity(maxPods int) corev1.ResourceList {
	return corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("32"),
		corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods:   *resource.NewQuantity(int64(maxPods), resource.DecimalSI),
	}
}

// kwokNode builds the i-th fake node. KWOK fills in its conditions and heartbeats; capacity is
// set here because KWOK keeps what the object says.
func kwokNode(i, maxPods int) *corev1.Node {
	name := KWOKNodeName(i)
	capacity := kwokCapacity(maxPods)
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: name,
			Labels: map[string]string{
				KWOKNodeLabelKey:       KWOKNodeLabelValue,
				corev1.LabelHostname:   name,
				corev1.LabelOSStable:   "linux",
				corev1.LabelArchStable: "amd64",
				"node.kubernetes.io/exclude-from-external-load-balancers": "true",
			},
			Annotations: map[string]string{KWOKTaintKey: "fake"},
		},
		Spec: corev1.NodeSpec{
			Taints: []corev1.Taint{{Key: KWOKTaintKey, Value: "fake", Effect: corev1.TaintEffectNoSchedule}},
		},
		Status: corev1.NodeStatus{Capacity: capacity, Allocatable: capacity.DeepCopy()},
	}
}

// ensureKWOKNodes makes exactly KWOKNodes fake nodes exist, each with room for KWOKMaxPods Pods,
// and waits until all are Ready.
func (cl *cluster) ensureKWOKNodes(ctx context.Context) (string, bool, error) {
	changed, err := ApplyKWOKNodes(ctx, cl.client.CoreV1().Nodes(), cl.cfg.KWOKNodes, cl.cfg.KWOKMaxPods)
	if err != nil {
		return "", false, err
	}
	err = poll(ctx, 2*time.Minute, func(ctx context.Context) error {
		for i := 0; i < cl.cfg.KWOKNodes; i++ {
			if err := cl.nodeReady(ctx, KWOKNodeName(i)); err != nil {
				return err
			}
		}
		return nil
	}, cl.aliveCheck(compKWOK))
	if err != nil {
		return "", false, err
	}
	return fmt.Sprintf("%d Ready, %d Pods each", cl.cfg.KWOKNodes, cl.cfg.KWOKMaxPods), changed, nil
}

// ApplyKWOKNodes makes the fake nodes paddock-kwok-0 to paddock-kwok-<count-1> exist with room
// for maxPods Pods each, and deletes other nodes labelled as KWOK's. A node brought up earlier
// with another capacity gets the new one; Pods already bound to it stay. It reports whether it
// changed anything.
func ApplyKWOKNodes(ctx context.Context, nodes typedcorev1.NodeInterface, count, maxPods int) (bool, error) {
	list, err := nodes.List(ctx, metav1.ListOptions{LabelSelector: KWOKNodeLabelKey + "=" + KWOKNodeLabelValue})
	if err != nil {
		return false, err
	}
	want := map[string]bool{}
	for i := range count {
		want[KWOKNodeName(i)] = true
	}
	have := map[string]bool{}
	var work []func() error
	for _, n := range list.Items {
		have[n.Name] = true
		switch {
		case !want[n.Name]:
			work = append(work, func() error {
				err := nodes.Delete(ctx, n.Name, metav1.DeleteOptions{})
				if apierrors.IsNotFound(err) {
					return nil
				}
				return err
			})
		case n.Status.Allocatable.Pods().Value() != int64(maxPods) || n.Status.Capacity.Pods().Value() != int64(maxPods):
			work = append(work, func() error { return resizeKWOKNode(ctx, nodes, n.Name, maxPods) })
		}
	}
	for i := range count {
		if have[KWOKNodeName(i)] {
			continue
		}
		node := kwokNode(i, maxPods)
		work = append(work, func() error {
			_, err := nodes.Create(ctx, node, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				return nil
			}
			return err
		})
	}
	if err := parallel(16, work); err != nil {
		return false, fmt.Errorf("create, resize or delete KWOK nodes: %w", err)
	}
	return len(work) > 0, nil
}

// resizeKWOKNode sets the fake node's Pod capacity (and allocatable) to maxPods. KWOK keeps what
// the node's status says, so the patch sticks.
func resizeKWOKNode(ctx context.Context, nodes typedcorev1.NodeInterface, name string, maxPods int) error {
	capacity := kwokCapacity(maxPods)
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"capacity": capacity, "allocatable": capacity}})
	if err != nil {
		return err
	}
	_, err = nodes.Patch(ctx, name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	return err
}

func (cl *cluster) aliveCheck(name string) func() error {
	p := cl.cfg.process(name)
	return func() error {
		if p.pid() == 0 {
			return fmt.Errorf("%s exited; last lines of %s:\n%s", name, p.logFile, p.tail(25))
		}
		return nil
	}
}

// parallel runs fns with at most n at a time and returns the first error.
func parallel(n int, fns []func() error) error {
	sem := make(chan struct{}, n)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	for _, fn := range fns {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := fn(); err != nil {
				mu.Lock()
				if first == nil {
					first = err
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return first
}
