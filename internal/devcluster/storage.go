package devcluster

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// defaultStorageClass is the cluster's default StorageClass, served by `paddock dev provisioner`.
// Binding waits for the first consumer so a volume is made on the node its pod runs on.
func defaultStorageClass() *storagev1.StorageClass {
	mode := storagev1.VolumeBindingWaitForFirstConsumer
	return &storagev1.StorageClass{
		ObjectMeta: metav1.ObjectMeta{
			Name:        StorageClassName,
			Annotations: map[string]string{"storageclass.kubernetes.io/is-default-class": "true"},
		},
		Provisioner:       ProvisionerName,
		ReclaimPolicy:     ptr.To(corev1.PersistentVolumeReclaimDelete),
		VolumeBindingMode: &mode,
	}
}

func (cl *cluster) ensureStorageClass(ctx context.Context) (string, bool, error) {
	_, err := cl.client.StorageV1().StorageClasses().Create(ctx, defaultStorageClass(), metav1.CreateOptions{})
	switch {
	case err == nil:
		return StorageClassName + " (default) created", true, nil
	case apierrors.IsAlreadyExists(err):
		return StorageClassName + " (default) exists", false, nil
	default:
		return "", false, fmt.Errorf("create StorageClass %s: %w", StorageClassName, err)
	}
}
