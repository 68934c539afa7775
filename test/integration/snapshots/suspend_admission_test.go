package snapshots

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	snapshotsv1alpha1 "github.com/paddock-dev/paddock/api/snapshots/v1alpha1"
	"github.com/paddock-dev/paddock/test/builder"
	"github.com/paddock-dev/paddock/test/framework"
)

// as is a client acting as user (impersonated by the test's administrator).
func as(t *testing.T, user string) client.Client {
	t.Helper()
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	c, err := client.New(cfg, client.Options{Scheme: env.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// grant gives user the rules in ns, through a Role and RoleBinding named name.
func grant(t *testing.T, ctx context.Context, ns, name, user string, rules ...rbacv1.PolicyRule) {
	t.Helper()
	framework.MustCreate(t, ctx, env.Client, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Rules: rules})
	framework.MustCreate(t, ctx, env.Client, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name}})
}

// controllerIdentity is a ServiceAccount bound to the controller's generated ClusterRole
// (config/rbac/extensions/role.yaml, a copy named for ns), as the install binds paddock-controller.
func controllerIdentity(t *testing.T, ctx context.Context, ns string) string {
	t.Helper()
	return boundIdentity(t, ctx, ns, "extensions")
}

// boundIdentity is a ServiceAccount paddock-controller in ns bound to a copy of the generated
// ClusterRole config/rbac/<role>/role.yaml.
func boundIdentity(t *testing.T, ctx context.Context, ns, roleDir string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(framework.RepoRoot(), "config", "rbac", roleDir, "role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := framework.DecodeManifests(data)
	if err != nil || len(objs) != 1 {
		t.Fatalf("config/rbac/%s/role.yaml: %d objects, %v; want its one ClusterRole", roleDir, len(objs), err)
	}
	role := &rbacv1.ClusterRole{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(objs[0].Object, role); err != nil {
		t.Fatal(err)
	}
	role.Name += "-" + ns
	framework.MustCreate(t, ctx, env.Client, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "paddock-controller", Namespace: ns}})
	framework.MustCreate(t, ctx, env.Client, role)
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "paddock-controller", Namespace: ns}},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name}}
	framework.MustCreate(t, ctx, env.Client, binding)
	t.Cleanup(func() {
		_ = env.Client.Delete(context.Background(), binding)
		_ = env.Client.Delete(context.Background(), role)
	})
	return "system:serviceaccount:" + ns + ":paddock-controller"
}

// TestSuspendRootfsNeedsSnapshotRights: snapshots.paddock.dev/suspend: rootfs makes the controller
// create SandboxSnapshots, so a namespace editor who may write Sandboxes, claims and templates but
// not create SandboxSnapshots cannot set it on any of them (nor patch it in), and is told which
// permission is missing; one granted create on sandboxsnapshots can, and so can the controller
// with its install ClusterRole (its copies onto the Sandboxes it makes). Writes that keep the
// value, and other values (which suspend as upstream), need nothing.
func TestSuspendRootfsNeedsSnapshotRights(t *testing.T) {
	ctx := framework.Context(t, 2*framework.DefaultTimeout)
	ns := env.Namespace(t)
	framework.InstallAdmissionPolicy(t, ctx, env.Client, "suspend-rootfs-policy.yaml", ns)
	write := rbacv1.PolicyRule{Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"},
		APIGroups: []string{agentsv1beta1.GroupVersion.Group, extensionsv1beta1.GroupVersion.Group},
		Resources: []string{"sandboxes", "sandboxclaims", "sandboxtemplates", "sandboxwarmpools"}}
	grant(t, ctx, ns, "editor", "editor", write)
	grant(t, ctx, ns, "snapshotter", "snapshotter", write, rbacv1.PolicyRule{Verbs: []string{"create"},
		APIGroups: []string{snapshotsv1alpha1.GroupVersion.Group}, Resources: []string{"sandboxsnapshots"}})
	editor, snapshotter := as(t, "editor"), as(t, "snapshotter")
	controller := as(t, controllerIdentity(t, ctx, ns))

	rootfs := func(name string) []client.Object {
		return []client.Object{
			builder.MakeSandbox(name, ns).Annotation(snapshotsv1alpha1.SuspendAnnotation, snapshotsv1alpha1.SuspendRootfs).Obj(),
			builder.MakeClaim(name, ns, "pool").Annotation(snapshotsv1alpha1.SuspendAnnotation, snapshotsv1alpha1.SuspendRootfs).Obj(),
			builder.MakeTemplate(name, ns).Annotation(snapshotsv1alpha1.SuspendAnnotation, snapshotsv1alpha1.SuspendRootfs).Obj(),
		}
	}
	want := fmt.Sprintf("editor may not: it needs create on sandboxsnapshots.snapshots.paddock.dev in namespace %s", ns)
	// The policy takes effect a moment after it is created.
	framework.Eventually(t, func(ctx context.Context) error {
		for _, obj := range rootfs("by-editor") {
			err := editor.Create(ctx, obj)
			if err == nil {
				_ = env.Client.Delete(ctx, obj)
				return fmt.Errorf("%T with suspend: rootfs admitted from the editor", obj)
			}
			if !strings.Contains(err.Error(), want) {
				return fmt.Errorf("%T with suspend: rootfs from the editor refused with %q, want it to contain %q", obj, err, want)
			}
		}
		return nil
	})
	// suspend: memory keeps the sandbox's memory on the node: the same right, on claims and
	// templates as on Sandboxes (memory_test.go).
	for _, obj := range []client.Object{
		builder.MakeClaim("memory-by-editor", ns, "pool").Annotation(snapshotsv1alpha1.SuspendAnnotation, snapshotsv1alpha1.SuspendMemory).Obj(),
		builder.MakeTemplate("memory-by-editor", ns).Annotation(snapshotsv1alpha1.SuspendAnnotation, snapshotsv1alpha1.SuspendMemory).Obj(),
	} {
		if err := editor.Create(ctx, obj); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("creating %T with suspend: memory as the editor: %v, want refused naming the permission", obj, err)
		}
	}

	// Patched in, or changed to rootfs, on the editor's own objects: refused too.
	plain := builder.MakeSandbox("plain", ns).Annotation(snapshotsv1alpha1.SuspendAnnotation, "volumes").Obj()
	if err := editor.Create(ctx, plain); err != nil {
		t.Fatalf("creating a Sandbox with another suspend value as the editor: %v", err)
	}
	for _, patch := range []string{
		`{"metadata":{"annotations":{"snapshots.paddock.dev/suspend":"rootfs"}}}`,
		`{"metadata":{"annotations":{"snapshots.paddock.dev/suspend":"rootfs","other":"x"}}}`,
	} {
		err := editor.Patch(ctx, plain.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(patch)))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("patching %s onto the editor's Sandbox as the editor: %v, want refused naming the permission", patch, err)
		}
	}

	// Granted create on sandboxsnapshots: the same objects pass.
	for _, obj := range rootfs("by-snapshotter") {
		if err := snapshotter.Create(ctx, obj); err != nil {
			t.Errorf("creating %T with suspend: rootfs as a user who may create SandboxSnapshots: %v", obj, err)
		}
	}
	// The controller, with the install's ClusterRole, as when it copies the template's or the
	// claim's choice onto a Sandbox it makes or adopts.
	if err := controller.Create(ctx, builder.MakeSandbox("by-controller", ns).Annotation(snapshotsv1alpha1.SuspendAnnotation, snapshotsv1alpha1.SuspendRootfs).Obj()); err != nil {
		t.Errorf("creating a Sandbox with suspend: rootfs as the controller's ServiceAccount: %v", err)
	}
	if err := controller.Patch(ctx, plain.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"snapshots.paddock.dev/suspend":"rootfs"}}}`))); err != nil {
		t.Errorf("setting suspend: rootfs on a Sandbox as the controller's ServiceAccount: %v", err)
	}

	// Writes that do not turn it on: the editor edits the Sandbox that already keeps its root
	// filesystem, opts a claim out with another value, and claims from an annotated template.
	if err := editor.Patch(ctx, &agentsv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: "by-snapshotter", Namespace: ns}},
		client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"team":"a"}}}`))); err != nil {
		t.Errorf("labelling a Sandbox that already has suspend: rootfs as the editor: %v", err)
	}
	if err := editor.Create(ctx, builder.MakeClaim("opt-out", ns, "pool").Annotation(snapshotsv1alpha1.SuspendAnnotation, "volumes").Obj()); err != nil {
		t.Errorf("creating a claim that opts out with another suspend value as the editor: %v", err)
	}
	if err := editor.Create(ctx, builder.MakeClaim("from-template", ns, "by-snapshotter").Obj()); err != nil {
		t.Errorf("creating a claim with no suspend annotation as the editor: %v", err)
	}
	if err := editor.Patch(ctx, plain.DeepCopy(), client.RawPatch(types.JSONPatchType,
		[]byte(`[{"op":"remove","path":"/metadata/annotations/snapshots.paddock.dev~1suspend"}]`))); err != nil {
		t.Errorf("removing suspend from a Sandbox as the editor: %v", err)
	}
}

// rbacv1PodsAndSandboxes is what a namespace editor may write: Pods and Paddock's objects.
func rbacv1PodsAndSandboxes() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}, APIGroups: []string{""}, Resources: []string{"pods"}},
		{Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"},
			APIGroups: []string{agentsv1beta1.GroupVersion.Group, extensionsv1beta1.GroupVersion.Group},
			Resources: []string{"sandboxes", "sandboxclaims", "sandboxtemplates"}},
	}
}
