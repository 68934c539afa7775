package claimsettings

import (
	"context"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

func containsNamespace(write, ns string) bool { return strings.Contains(write, " "+ns+"/") }

// recordingClient is the claim controller's client with every successful write recorded.
type recordingClient struct {
	client.Client
	log *writeLog
}

func (c *recordingClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	err := c.Client.Create(ctx, obj, opts...)
	if err == nil {
		c.log.add("create", obj, "")
	}
	return err
}

func (c *recordingClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	err := c.Client.Patch(ctx, obj, patch, opts...)
	if err == nil {
		c.log.add("patch", obj, "")
	}
	return err
}

func (c *recordingClient) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	err := c.Client.Update(ctx, obj, opts...)
	if err == nil {
		c.log.add("update", obj, "")
	}
	return err
}

func (c *recordingClient) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	err := c.Client.Delete(ctx, obj, opts...)
	if err == nil {
		c.log.add("delete", obj, "")
	}
	return err
}

func (c *recordingClient) Status() client.SubResourceWriter {
	return &recordingStatus{SubResourceWriter: c.Client.Status(), log: c.log}
}

type recordingStatus struct {
	client.SubResourceWriter
	log *writeLog
}

func (s *recordingStatus) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	err := s.SubResourceWriter.Patch(ctx, obj, patch, opts...)
	if err == nil {
		s.log.add("patch", obj, "/status")
	}
	return err
}

func (s *recordingStatus) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	err := s.SubResourceWriter.Update(ctx, obj, opts...)
	if err == nil {
		s.log.add("update", obj, "/status")
	}
	return err
}
