package cluster

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	"github.com/paddock-dev/paddock/internal/manager"
	"github.com/paddock-dev/paddock/test/builder"
	"github.com/paddock-dev/paddock/test/framework"
)

// testSandboxLifecycle drives one Sandbox through the controller installed in the cluster, on the
// real node: its Pod serves a file from its volume by pod IP, its name resolves through the
// headless Service, the file survives suspend and resume, and expiry removes Pod and Service
// while the volume stays.
func testSandboxLifecycle(t *testing.T) {
	ns := namespace(t)
	ctx := framework.Context(t, 6*time.Minute)
	c, err := client.New(suite.restConfig, client.Options{Scheme: manager.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	sb := builder.MakeSandbox("lifecycle", ns).PodSpec(corev1.PodSpec{
		// The shell does not forward SIGTERM; a short grace keeps suspend and expiry quick.
		TerminationGracePeriodSeconds: ptr[int64](1),
		Containers: []corev1.Container{{
			Name: "web", Image: *imageFlag,
			// The marker on the shell's command line lets the down test find a leftover process.
			Command:      []string{"sh", "-c", "httpd -f -p 8080 -h /data; : " + marker},
			Ports:        []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
			VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
		}},
	}).VolumeClaim("data", "64Mi").Service(true).Obj()
	framework.MustCreate(t, ctx, c, sb)

	ip := waitSandboxReady(t, c, sb)
	if out, err := execInPod(ctx, ns, sb.Name, "sh", "-c", "echo persisted > /data/hello.txt"); err != nil {
		t.Fatalf("writing the file: %v: %s", err, out)
	}
	expectFile(t, ip)

	fqdn := fmt.Sprintf("%s.%s.svc.cluster.local", sb.Name, ns)
	framework.EventuallyWithin(t, time.Minute, func(ctx context.Context) error {
		out, err := execInPod(ctx, ns, sb.Name, "nslookup", fqdn)
		if err != nil || !strings.Contains(out, ip) {
			return fmt.Errorf("nslookup %s: %v: %s (want %s)", fqdn, err, out, ip)
		}
		return nil
	})

	setSandbox(t, c, sb, func(s *agentsv1beta1.Sandbox) { s.Spec.OperatingMode = agentsv1beta1.SandboxOperatingModeSuspended })
	framework.EventuallyWithin(t, 2*time.Minute, func(ctx context.Context) error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(sb), sb); err != nil {
			return err
		}
		if err := builder.HasCondition(sb.Status.Conditions, agentsv1beta1.SandboxConditionSuspended, metav1.ConditionTrue, agentsv1beta1.SandboxReasonPodTerminated); err != nil {
			return err
		}
		return podGone(ctx, c, ns, sb.Name)
	})
	pvc := &corev1.PersistentVolumeClaim{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "data-" + sb.Name}, pvc); err != nil {
		t.Fatalf("volume claim after suspend: %v", err)
	}

	setSandbox(t, c, sb, func(s *agentsv1beta1.Sandbox) { s.Spec.OperatingMode = agentsv1beta1.SandboxOperatingModeRunning })
	expectFile(t, waitSandboxReady(t, c, sb))

	setSandbox(t, c, sb, func(s *agentsv1beta1.Sandbox) {
		s.Spec.ShutdownTime = &metav1.Time{Time: time.Now().Add(5 * time.Second)}
	})
	framework.EventuallyWithin(t, 2*time.Minute, func(ctx context.Context) error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(sb), sb); err != nil {
			return err
		}
		if err := builder.HasCondition(sb.Status.Conditions, agentsv1beta1.SandboxConditionReady, metav1.ConditionFalse, agentsv1beta1.SandboxReasonExpired); err != nil {
			return err
		}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: sb.Name}, &corev1.Service{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("service after expiry: %v", err)
		}
		return podGone(ctx, c, ns, sb.Name)
	})
	if err := c.Get(ctx, client.ObjectKeyFromObject(pvc), pvc); err != nil {
		t.Fatalf("volume claim after expiry with Retain: %v", err)
	}
}

func waitSandboxReady(t *testing.T, c client.Client, sb *agentsv1beta1.Sandbox) string {
	t.Helper()
	framework.EventuallyWithin(t, 3*time.Minute, func(ctx context.Context) error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(sb), sb); err != nil {
			return err
		}
		if len(sb.Status.PodIPs) == 0 {
			return fmt.Errorf("sandbox has no pod IP; conditions %s", builder.FormatConditions(sb.Status.Conditions))
		}
		return builder.HasCondition(sb.Status.Conditions, agentsv1beta1.SandboxConditionReady, metav1.ConditionTrue, "")
	})
	return sb.Status.PodIPs[0]
}

func expectFile(t *testing.T, ip string) {
	t.Helper()
	framework.EventuallyWithin(t, time.Minute, func(ctx context.Context) error {
		body, err := httpGet(ctx, "http://"+ip+":8080/hello.txt")
		if err != nil || body != "persisted\n" {
			return fmt.Errorf("GET http://%s:8080/hello.txt = %q, %v; want \"persisted\\n\"", ip, body, err)
		}
		return nil
	})
}

func setSandbox(t *testing.T, c client.Client, sb *agentsv1beta1.Sandbox, change func(*agentsv1beta1.Sandbox)) {
	t.Helper()
	framework.Eventually(t, func(ctx context.Context) error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(sb), sb); err != nil {
			return err
		}
		change(sb)
		return c.Update(ctx, sb)
	})
}

func podGone(ctx context.Context, c client.Client, ns, name string) error {
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &corev1.Pod{}); !apierrors.IsNotFound(err) {
		return fmt.Errorf("pod %s/%s still exists (get: %v)", ns, name, err)
	}
	return nil
}
