package sandboxsnapshot

import (
	"path"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	"github.com/paddock-dev/paddock/internal/snapshot"
)

// Names the restore adds to a published template's pod spec.
const (
	// restoreInitContainer fills a Sandbox's new volumes from the snapshot image.
	restoreInitContainer = "paddock-restore-volumes"
	// restoreNoTokenVolume is an empty directory over the service account token's path in the
	// restore init container, so that the token, when the template mounts one, never reaches it.
	restoreNoTokenVolume = "paddock-restore-no-token"
	// restoreMountDir is where the restore init container mounts each volume, as
	// restoreMountDir/<volume name>.
	restoreMountDir        = "/paddock-restore"
	serviceAccountTokenDir = "/var/run/secrets/kubernetes.io/serviceaccount"
)

// volumesToCapture are the volumes of sb that are its own state: its volumeClaimTemplates,
// where the captured container mounts them whole (a subPath mount shows part of a volume, which
// cannot be restored as the volume). emptyDirs go with the Pod and are not captured; Secrets,
// ConfigMaps, projected and service account volumes are never captured (credentials).
func volumesToCapture(sb *agentsv1beta1.Sandbox, container string) []snapshot.Volume {
	var out []snapshot.Volume
	for _, c := range sb.Spec.PodTemplate.Spec.Containers {
		if c.Name != container {
			continue
		}
		for _, t := range sb.Spec.VolumeClaimTemplates {
			i := slices.IndexFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool {
				return m.Name == t.Name && m.SubPath == "" && m.SubPathExpr == ""
			})
			if i >= 0 {
				out = append(out, snapshot.Volume{Name: t.Name, MountPath: path.Clean(c.VolumeMounts[i].MountPath)})
			}
		}
	}
	return out
}

// withRestore replaces spec's restore init container (a snapshot of a Sandbox that was itself
// started from a snapshot carries one) with one that fills volumes from image, or removes it
// when volumes is empty.
func withRestore(spec *corev1.PodSpec, image string, volumes []string) {
	spec.InitContainers = slices.DeleteFunc(spec.InitContainers, func(c corev1.Container) bool { return c.Name == restoreInitContainer })
	spec.Volumes = slices.DeleteFunc(spec.Volumes, func(v corev1.Volume) bool { return v.Name == restoreNoTokenVolume })
	if len(volumes) == 0 {
		return
	}
	spec.Volumes = append(spec.Volumes, corev1.Volume{Name: restoreNoTokenVolume, VolumeSource: corev1.VolumeSource{
		EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: ptr.To(resource.MustParse("1Mi"))},
	}})
	spec.InitContainers = append(spec.InitContainers, constructRestoreContainer(image, volumes))
}

// constructRestoreContainer runs the snapshot image's copy of paddock-snapshot, which fills
// each volume from the image when the volume is empty (a resumed Sandbox's volume, which holds
// its newer state, is kept). It gets no environment, no token (an empty directory over the
// service account token's path) and a read-only root filesystem; it runs as root with only the
// capabilities that set owners, modes and times exactly.
func constructRestoreContainer(image string, volumes []string) corev1.Container {
	c := corev1.Container{
		Name:                     restoreInitContainer,
		Image:                    image,
		ImagePullPolicy:          corev1.PullIfNotPresent,
		Command:                  []string{snapshot.RestoreBinaryPath, "restore"},
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		SecurityContext: &corev1.SecurityContext{
			RunAsUser:                ptr.To(int64(0)),
			RunAsGroup:               ptr.To(int64(0)),
			RunAsNonRoot:             ptr.To(false),
			AllowPrivilegeEscalation: ptr.To(false),
			ReadOnlyRootFilesystem:   ptr.To(true),
			Capabilities: &corev1.Capabilities{
				Drop: []corev1.Capability{"ALL"},
				Add:  []corev1.Capability{"CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID"},
			},
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
		VolumeMounts: []corev1.VolumeMount{{Name: restoreNoTokenVolume, MountPath: serviceAccountTokenDir, ReadOnly: true}},
	}
	for _, v := range volumes {
		dir := path.Join(restoreMountDir, v)
		c.Args = append(c.Args, "--volume="+v+"="+dir)
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: v, MountPath: dir})
	}
	return c
}
