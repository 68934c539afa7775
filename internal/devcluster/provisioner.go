package devcluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v13/controller"
)

// hostPathProvisioner provisions volumes of StorageClassName as directories under dir. The
// volume is pinned to the node its first pod was scheduled to (the class binds on first
// consumer), which is where the directory is.
type hostPathProvisioner struct {
	dir string
}

var _ controller.Provisioner = hostPathProvisioner{}

// hostPathVolume builds the PersistentVolume for a claim: a directory named after the volume.
func hostPathVolume(dir string, opts controller.ProvisionOptions) *corev1.PersistentVolume {
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: opts.PVName},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:    corev1.ResourceList{corev1.ResourceStorage: opts.PVC.Spec.Resources.Requests[corev1.ResourceStorage]},
			AccessModes: opts.PVC.Spec.AccessModes,
			VolumeMode:  opts.PVC.Spec.VolumeMode,
			PersistentVolumeSource: corev1.PersistentVolumeSource{
				HostPath: &corev1.HostPathVolumeSource{Path: filepath.Join(dir, opts.PVName), Type: ptrTo(corev1.HostPathDirectoryOrCreate)},
			},
			StorageClassName: opts.StorageClass.Name,
			MountOptions:     opts.StorageClass.MountOptions,
		},
	}
	if opts.StorageClass.ReclaimPolicy != nil {
		pv.Spec.PersistentVolumeReclaimPolicy = *opts.StorageClass.ReclaimPolicy
	}
	if opts.SelectedNodeName != "" {
		pv.Spec.NodeAffinity = &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{
				Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{opts.SelectedNodeName},
			}}}},
		}}
	}
	return pv
}

func ptrTo[T any](v T) *T { return &v }

func (p hostPathProvisioner) Provision(_ context.Context, opts controller.ProvisionOptions) (*corev1.PersistentVolume, controller.ProvisioningState, error) {
	pv := hostPathVolume(p.dir, opts)
	// World-writable: pods run as any user and must be able to write their volume.
	if err := os.MkdirAll(pv.Spec.HostPath.Path, 0o777); err != nil {
		return nil, controller.ProvisioningFinished, fmt.Errorf("create volume directory: %w", err)
	}
	if err := os.Chmod(pv.Spec.HostPath.Path, 0o777); err != nil {
		return nil, controller.ProvisioningFinished, err
	}
	return pv, controller.ProvisioningFinished, nil
}

func (p hostPathProvisioner) Delete(_ context.Context, pv *corev1.PersistentVolume) error {
	if pv.Spec.HostPath == nil {
		return &controller.IgnoredError{Reason: "not a host path volume"}
	}
	path := filepath.Clean(pv.Spec.HostPath.Path)
	// Never remove anything this provisioner did not make.
	if filepath.Dir(path) != filepath.Clean(p.dir) || !strings.HasPrefix(filepath.Base(path), "pvc-") {
		return &controller.IgnoredError{Reason: fmt.Sprintf("path %s is not a volume under %s", path, p.dir)}
	}
	return os.RemoveAll(path)
}

// RunProvisioner serves StorageClassName until ctx ends (`paddock dev provisioner`).
func RunProvisioner(ctx context.Context, kubeconfigPath, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfigPath)
	if err != nil {
		return fmt.Errorf("load kubeconfig %s: %w", kubeconfigPath, err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	pc := controller.NewProvisionController(ctx, client, ProvisionerName, hostPathProvisioner{dir: dir},
		controller.LeaderElection(false))
	pc.Run(ctx)
	return nil
}
