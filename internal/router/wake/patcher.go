package wake

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
)

// FieldManager names the router's writes in managedFields.
const FieldManager = "paddock-router"

// KubePatcher patches Sandboxes through the API server.
type KubePatcher struct{ c dynamic.Interface }

// NewKubePatcher returns a Patcher for cfg's API server.
func NewKubePatcher(cfg *rest.Config) (*KubePatcher, error) {
	c, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &KubePatcher{c: c}, nil
}

// JSONPatch sends an RFC 6902 patch.
func (p *KubePatcher) JSONPatch(ctx context.Context, namespace, name string, patch []byte) error {
	return p.patch(ctx, namespace, name, types.JSONPatchType, patch)
}

// MergePatch sends an RFC 7386 merge patch.
func (p *KubePatcher) MergePatch(ctx context.Context, namespace, name string, patch []byte) error {
	return p.patch(ctx, namespace, name, types.MergePatchType, patch)
}

func (p *KubePatcher) patch(ctx context.Context, namespace, name string, pt types.PatchType, data []byte) error {
	_, err := p.c.Resource(agentsv1beta1.GroupVersion.WithResource("sandboxes")).Namespace(namespace).
		Patch(ctx, name, pt, data, metav1.PatchOptions{FieldManager: FieldManager})
	return err
}
