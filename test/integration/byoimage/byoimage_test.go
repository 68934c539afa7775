// Package byoimage proves bring-your-own-image against a real kube-apiserver with every
// controller running as main runs them (docs/byo-image.md): a template that asks for sandboxd
// injection yields Pods with the installer, the volumes and the wrapped command; its warm members
// start locked and declare sandboxd's ports; an injected sandboxd's failed preflight becomes the
// Sandbox's ImageIncompatible condition and the pool's MembersIncompatible; a template the
// injection cannot honour is InjectionInvalid with no Pod; and a container with no command runs
// its image's entrypoint and cmd, read from a private registry on loopback with the template's
// imagePullSecrets, or gets ImageConfigUnreadable with no Pod. The tests play the kubelet by
// writing Pod status.
package byoimage

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/otel/trace/noop"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	"github.com/paddock-dev/paddock/api/sandboxd"
	"github.com/paddock-dev/paddock/internal/blueprint"
	"github.com/paddock-dev/paddock/internal/manager"
	"github.com/paddock-dev/paddock/test/builder"
	"github.com/paddock-dev/paddock/test/framework"
)

// sandboxdImage is the controllers' --sandboxd-image.
const sandboxdImage = "registry.test/paddock/sandbox:v1"

// imageConfigLastsAfter is how long the controllers retry a registry that does not answer as a
// blip.
const imageConfigLastsAfter = 2 * time.Second

var env *framework.Env

func TestMain(m *testing.M) {
	if os.Getenv("PADDOCK_TEST_LOG") != "" {
		ctrl.SetLogger(zap.New(zap.UseDevMode(true)))
	} else {
		ctrl.SetLogger(logr.Discard())
	}
	framework.RunMain(m, &env, func(e *framework.Env) (func(), error) {
		return framework.StartControllersWith(e, func(o *manager.Options) {
			o.SandboxdImage = sandboxdImage
			// A registry that does not answer for this long is lasting (ImageConfigUnreadable).
			o.ImageConfigLastsAfter = imageConfigLastsAfter
		}, noop.NewTracerProvider())
	})
}

// webTemplate is an image without sandboxd whose command serves a web app, injected.
func webTemplate(ns string) *extensionsv1beta1.SandboxTemplate {
	return builder.MakeTemplate("web", ns).Image("registry.test/web:1").InjectSandboxd().
		Command([]string{"httpd", "-f"}, "-p", "8000").Port("http", 8000).Obj()
}

func TestInjectedWarmMemberAndItsIncompatibleImage(t *testing.T) {
	ctx := framework.Context(t, 3*time.Minute)
	ns := env.Namespace(t)
	framework.MustCreate(t, ctx, env.Client, webTemplate(ns))
	framework.MustCreate(t, ctx, env.Client, builder.MakeWarmPool("web", ns, "web").Replicas(1).Obj())

	// The member's spec is the template's, locked like any sandboxd member's.
	var member agentsv1beta1.Sandbox
	framework.Eventually(t, func(ctx context.Context) error {
		var list agentsv1beta1.SandboxList
		if err := env.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return err
		}
		if len(list.Items) != 1 {
			return fmt.Errorf("%d members, want 1", len(list.Items))
		}
		member = list.Items[0]
		return nil
	})
	if !blueprint.LockedUntilClaimed(&member.Spec.PodTemplate.Spec) || !blueprint.InjectsSandboxd(member.Spec.PodTemplate.ObjectMeta) {
		t.Errorf("member %s: locked %v, injects sandboxd %v; want both", member.Name,
			blueprint.LockedUntilClaimed(&member.Spec.PodTemplate.Spec), blueprint.InjectsSandboxd(member.Spec.PodTemplate.ObjectMeta))
	}
	// The router and the E2B front door dial only ports the Sandbox declares: it declares sandboxd's.
	if !slices.ContainsFunc(member.Spec.PodTemplate.Spec.Containers[0].Ports, func(p corev1.ContainerPort) bool { return p.ContainerPort == sandboxd.EnvdPort }) {
		t.Errorf("member %s declares ports %v, want E2B's envd port %d among them", member.Name, member.Spec.PodTemplate.Spec.Containers[0].Ports, sandboxd.EnvdPort)
	}

	// Its Pod: the installer from --sandboxd-image with no token, sandboxd's volume mounted
	// read-only, the workspace, the command wrapped, the lock and the tokens in the container.
	pod := &corev1.Pod{}
	framework.Eventually(t, func(ctx context.Context) error {
		return env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: member.Name}, pod)
	})
	if len(pod.Spec.InitContainers) != 1 {
		t.Fatalf("init containers %v, want the installer alone", pod.Spec.InitContainers)
	}
	inst, c := pod.Spec.InitContainers[0], pod.Spec.Containers[0]
	got := []any{inst.Name, inst.Image, inst.Command, len(inst.Env), c.Command, c.Args}
	want := []any{blueprint.SandboxdInstaller, sandboxdImage, []string{sandboxd.BinaryPath, "--install-to=" + blueprint.InjectedSandboxd}, 0,
		[]string{blueprint.InjectedSandboxd}, []string{"--preflight", "--", "httpd", "-f", "-p", "8000"}}
	for i := range want {
		if fmt.Sprint(got[i]) != fmt.Sprint(want[i]) {
			t.Errorf("pod %s: installer name, image, command, env count, container command, args = %v; want %v", pod.Name, got, want)
			break
		}
	}
	if !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool {
		return m.Name == blueprint.SandboxdVolume && m.MountPath == blueprint.SandboxdDir && m.ReadOnly
	}) || !slices.ContainsFunc(pod.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == blueprint.WorkspaceVolume }) {
		t.Errorf("pod %s: mounts %v, volumes %v; want sandboxd's read-only and the workspace", pod.Name, c.VolumeMounts, pod.Spec.Volumes)
	}
	var names []string
	for _, e := range c.Env {
		names = append(names, e.Name)
	}
	for _, want := range []string{sandboxd.RequireClaimEnv, sandboxd.TokenEnv, sandboxd.ControlTokenEnv} {
		if !slices.Contains(names, want) {
			t.Errorf("container env %v lacks %s", names, want)
		}
	}
	var ports []int32
	for _, p := range c.Ports {
		ports = append(ports, p.ContainerPort)
	}
	if fmt.Sprint(ports) != fmt.Sprint([]int32{8000, sandboxd.RESTPort, sandboxd.GRPCPort, sandboxd.LegacyPort, sandboxd.EnvdPort}) {
		t.Errorf("container ports %v, want the app's then sandboxd's", ports)
	}

	// The kubelet reports what the injected sandboxd's preflight wrote as it exited.
	cause := "the image has no /bin/bash, which E2B's SDKs run every command with (/bin/bash -l -c) (fix: use an image with bash)"
	if _, err := framework.UpdatePodStatus(ctx, env.Client, client.ObjectKeyFromObject(pod), func(p *corev1.Pod) {
		p.Status.Phase = corev1.PodRunning
		framework.SetPodCondition(p, corev1.PodReady, corev1.ConditionFalse, "ContainersNotReady")
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{
			Name: c.Name, Image: c.Image, RestartCount: 2,
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
			LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: sandboxd.PreflightExitCode, Reason: "Error", Message: sandboxd.PreflightMessagePrefix + cause}},
		}}
	}); err != nil {
		t.Fatal(err)
	}
	sb := waitCondition(t, &member, agentsv1beta1.SandboxConditionReady, agentsv1beta1.SandboxReasonImageIncompatible)
	if msg := meta.FindStatusCondition(sb.Status.Conditions, agentsv1beta1.SandboxConditionReady).Message; msg != fmt.Sprintf("container %q cannot host sandboxd: %s", c.Name, cause) {
		t.Errorf("Ready message %q does not give the container and the cause", msg)
	}

	// The pool says so and holds the member rather than replacing it.
	pool := &extensionsv1beta1.SandboxWarmPool{}
	framework.Eventually(t, func(ctx context.Context) error {
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, pool); err != nil {
			return err
		}
		if err := builder.HasCondition(pool.Status.Conditions, extensionsv1beta1.PoolConditionProgressing, metav1.ConditionFalse,
			extensionsv1beta1.PoolReasonMembersIncompatible); err != nil {
			return fmt.Errorf("pool: %w (%s)", err, builder.FormatConditions(pool.Status.Conditions))
		}
		return nil
	})
	if msg := meta.FindStatusCondition(pool.Status.Conditions, extensionsv1beta1.PoolConditionProgressing).Message; !strings.Contains(msg, member.Name+": ") || !strings.Contains(msg, cause) {
		t.Errorf("pool Progressing message %q does not name the member and the cause", msg)
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(&member), &agentsv1beta1.Sandbox{}); err != nil {
		t.Errorf("the incompatible member is gone (%v); it should be held until the template changes", err)
	}
}

// A pod template asking for an injection that cannot be honoured (a volume named like sandboxd's)
// gets InjectionInvalid, naming the cause and the fix, and no Pod; though its container has no
// command, no registry is asked for its image's (registry.invalid would not answer).
func TestInjectionTheTemplateCannotHave(t *testing.T) {
	ctx := framework.Context(t, 3*time.Minute)
	ns := env.Namespace(t)
	sb := builder.MakeSandbox("taken-volume", ns).PodAnnotation(agentsv1beta1.InjectSandboxdAnnotation, "true").PodVolume(blueprint.SandboxdVolume).Obj()
	framework.MustCreate(t, ctx, env.Client, sb)
	got := waitCondition(t, sb, agentsv1beta1.SandboxConditionReady, agentsv1beta1.SandboxReasonInjectionInvalid)
	if msg := meta.FindStatusCondition(got.Status.Conditions, agentsv1beta1.SandboxConditionReady).Message; !strings.Contains(msg, `has a volume named "paddock-sandboxd"`) ||
		!strings.Contains(msg, "rename it") {
		t.Errorf("Ready message %q does not name the cause and the fix", msg)
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(sb), &corev1.Pod{}); !apierrors.IsNotFound(err) {
		t.Errorf("a Pod exists for a Sandbox whose injection was refused (get: %v)", err)
	}
}

// waitCondition polls sb until condition t is False with reason, and returns it.
func waitCondition(t *testing.T, sb *agentsv1beta1.Sandbox, condType, reason string) *agentsv1beta1.Sandbox {
	t.Helper()
	got := &agentsv1beta1.Sandbox{}
	framework.Eventually(t, func(ctx context.Context) error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(sb), got); err != nil {
			return err
		}
		if err := builder.HasCondition(got.Status.Conditions, condType, metav1.ConditionFalse, reason); err != nil {
			return fmt.Errorf("sandbox %s: %w (%s)", sb.Name, err, builder.FormatConditions(got.Status.Conditions))
		}
		return nil
	})
	return got
}
