package sandboxsnapshot

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	"github.com/paddock-dev/paddock/internal/snapshot"
)

// TestVolumesToCapture: the captured container's whole mounts of volumeClaimTemplates are
// captured; emptyDirs, Secrets, subPath mounts and other containers' volumes are not.
func TestVolumesToCapture(t *testing.T) {
	sb := &agentsv1beta1.Sandbox{}
	sb.Spec.VolumeClaimTemplates = []agentsv1beta1.PersistentVolumeClaimTemplate{}
	for _, n := range []string{"data", "cache", "part", "other"} {
		vct := agentsv1beta1.PersistentVolumeClaimTemplate{}
		vct.Name = n
		sb.Spec.VolumeClaimTemplates = append(sb.Spec.VolumeClaimTemplates, vct)
	}
	sb.Spec.PodTemplate.Spec.Containers = []corev1.Container{
		{Name: "main", VolumeMounts: []corev1.VolumeMount{
			{Name: "scratch", MountPath: "/tmp"},
			{Name: "creds", MountPath: "/var/run/creds"},
			{Name: "data", MountPath: "/home/user/data/"},
			{Name: "part", MountPath: "/part", SubPath: "x"},
			{Name: "cache", MountPath: "/cache", ReadOnly: true},
		}},
		{Name: "side", VolumeMounts: []corev1.VolumeMount{{Name: "other", MountPath: "/other"}}},
	}
	want := []snapshot.Volume{{Name: "data", MountPath: "/home/user/data"}, {Name: "cache", MountPath: "/cache"}}
	if d := cmp.Diff(want, volumesToCapture(sb, "main")); d != "" {
		t.Errorf("volumes (-want +got):\n%s", d)
	}
}

// TestTemplateRestoresVolumes: a snapshot holding volumes publishes a template whose restore
// init container runs the snapshot image's restore binary with no environment, no token (an
// empty directory over the token's path), a read-only root filesystem and only the
// capabilities that set owners and modes; a snapshot of a Sandbox started from a snapshot
// replaces the earlier restore, and one holding no volume removes it.
func TestTemplateRestoresVolumes(t *testing.T) {
	snap, spec := testSnapshot(), twoContainers()
	snap.Status.Volumes = []string{"data"}
	tpl, err := constructTemplate(snap, spec, nil, "main", "repo/ns/snap@sha256:ab")
	if err != nil {
		t.Fatal(err)
	}
	ps := tpl.Spec.PodTemplate.Spec
	if len(ps.InitContainers) != 1 {
		t.Fatalf("init containers %+v, want the restore", ps.InitContainers)
	}
	c := ps.InitContainers[0]
	if d := cmp.Diff([]string{"/.paddock/paddock-snapshot", "restore", "--volume=data=/paddock-restore/data"}, append(c.Command, c.Args...)); d != "" {
		t.Errorf("command (-want +got):\n%s", d)
	}
	if c.Image != "repo/ns/snap@sha256:ab" || len(c.Env) != 0 || len(c.EnvFrom) != 0 {
		t.Errorf("restore container image %q env %v envFrom %v; want the snapshot image and no environment", c.Image, c.Env, c.EnvFrom)
	}
	sc := c.SecurityContext
	if sc == nil || !*sc.ReadOnlyRootFilesystem || *sc.AllowPrivilegeEscalation || sc.Privileged != nil ||
		!cmp.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) != 4 {
		t.Errorf("security context %+v", sc)
	}
	wantMounts := []corev1.VolumeMount{
		{Name: restoreNoTokenVolume, MountPath: "/var/run/secrets/kubernetes.io/serviceaccount", ReadOnly: true},
		{Name: "data", MountPath: "/paddock-restore/data"},
	}
	if d := cmp.Diff(wantMounts, c.VolumeMounts); d != "" {
		t.Errorf("mounts (-want +got):\n%s", d)
	}

	// A snapshot of a Sandbox of that template.
	next := testSnapshot()
	next.Status.Volumes = []string{"data"}
	again, err := constructTemplate(next, tpl.Spec, nil, "main", "repo/ns/next@sha256:cd")
	if err != nil {
		t.Fatal(err)
	}
	if ics := again.Spec.PodTemplate.Spec.InitContainers; len(ics) != 1 || ics[0].Image != "repo/ns/next@sha256:cd" {
		t.Errorf("init containers %+v, want one restore of the new image", ics)
	}
	if n := len(again.Spec.PodTemplate.Spec.Volumes); n != 1 {
		t.Errorf("%d volumes, want the one empty directory over the token", n)
	}
	none, err := constructTemplate(testSnapshot(), tpl.Spec, nil, "main", "repo/ns/none@sha256:ef")
	if err != nil {
		t.Fatal(err)
	}
	if ps := none.Spec.PodTemplate.Spec; len(ps.InitContainers) != 0 || len(ps.Volumes) != 0 {
		t.Errorf("a snapshot without volumes keeps %+v %+v", ps.InitContainers, ps.Volumes)
	}
}
