package bench

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/paddock-dev/paddock/test/framework"
)

// kubeletStandIn marks every Pod in the cluster Running and Ready once, as KWOK does for Pods on
// its fake nodes. envtest runs no scheduler or kubelet, so without it no Sandbox would ever be
// Ready. It talks to the API server like any other client; the controllers cannot tell.
type kubeletStandIn struct {
	// podIP gives a Pod its address; framework.PodIP when it returns "".
	podIP  func(client.ObjectKey) string
	queue  workqueue.TypedRateLimitingInterface[client.ObjectKey]
	cancel context.CancelFunc
	done   chan struct{}
}

func startKubeletStandIn(cfg *rest.Config, c client.Client, workers int, podIP func(client.ObjectKey) string) (*kubeletStandIn, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	k := &kubeletStandIn{
		podIP:  podIP,
		queue:  workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[client.ObjectKey]()),
		cancel: cancel,
		done:   make(chan struct{}),
	}
	informer := cache.NewSharedIndexInformer(cache.NewListWatchFromClient(cs.CoreV1().RESTClient(), "pods", "", fields.Everything()),
		&corev1.Pod{}, 0, cache.Indexers{})
	enqueue := func(obj any) {
		if pod, ok := obj.(*corev1.Pod); ok && pod.DeletionTimestamp == nil && !podReady(pod) {
			k.queue.Add(client.ObjectKeyFromObject(pod))
		}
	}
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
	}); err != nil {
		cancel()
		return nil, err
	}
	go informer.RunWithContext(ctx)
	go func() {
		<-ctx.Done()
		k.queue.ShutDown()
	}()
	finished := make(chan struct{}, workers)
	for range workers {
		go func() {
			defer func() { finished <- struct{}{} }()
			for k.work(ctx, c) {
			}
		}()
	}
	go func() {
		for range workers {
			<-finished
		}
		close(k.done)
	}()
	return k, nil
}

// work marks one Pod Ready; it returns false when the queue is shut down.
func (k *kubeletStandIn) work(ctx context.Context, c client.Client) bool {
	key, shutdown := k.queue.Get()
	if shutdown {
		return false
	}
	defer k.queue.Done(key)
	if _, err := k.markReady(ctx, c, key); err != nil {
		if apierrors.IsNotFound(err) {
			k.queue.Forget(key)
			return true
		}
		klog.FromContext(ctx).V(2).Info("Kubelet stand-in retries", "pod", key, "err", err)
		k.queue.AddRateLimited(key)
		return true
	}
	k.queue.Forget(key)
	return true
}

// markReady makes the Pod Running and Ready with its address.
func (k *kubeletStandIn) markReady(ctx context.Context, c client.Client, key client.ObjectKey) (*corev1.Pod, error) {
	ip := ""
	if k.podIP != nil {
		ip = k.podIP(key)
	}
	if ip == "" {
		return framework.MarkPodReady(ctx, c, key)
	}
	return framework.UpdatePodStatus(ctx, c, key, func(p *corev1.Pod) {
		p.Status.Phase = corev1.PodRunning
		framework.SetPodCondition(p, corev1.PodScheduled, corev1.ConditionTrue, "")
		framework.SetPodCondition(p, corev1.PodReady, corev1.ConditionTrue, "")
		p.Status.PodIP, p.Status.PodIPs = ip, []corev1.PodIP{{IP: ip}}
	})
}

func (k *kubeletStandIn) stop() {
	k.cancel()
	<-k.done
}

func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
