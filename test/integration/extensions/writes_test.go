package extensions

import (
	"context"
	"fmt"
	"sync"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// write is one API write a controller sent, successful or not.
type write struct {
	Verb, Kind, Namespace, Name, Subresource string
	Err                                      error
}

// writeLog records the writes of one controller.
type writeLog struct {
	mu     sync.Mutex
	writes []write
}

func newWriteLog() *writeLog { return &writeLog{} }

func (l *writeLog) add(w write) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.writes = append(l.writes, w)
}

// To returns the writes to one object, by kind, namespace and name.
func (l *writeLog) To(kind, namespace, name string) []write {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []write
	for _, w := range l.writes {
		if w.Kind == kind && w.Namespace == namespace && w.Name == name {
			out = append(out, w)
		}
	}
	return out
}

// InNamespace returns every write to objects of a namespace.
func (l *writeLog) InNamespace(namespace string) []write {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []write
	for _, w := range l.writes {
		if w.Namespace == namespace {
			out = append(out, w)
		}
	}
	return out
}

func (w write) String() string {
	s := fmt.Sprintf("%s %s %s/%s", w.Verb, w.Kind, w.Namespace, w.Name)
	if w.Subresource != "" {
		s += "/" + w.Subresource
	}
	if w.Err != nil {
		s += fmt.Sprintf(" (failed: %v)", w.Err)
	}
	return s
}

// countingClient is the manager's client with every write recorded. It changes nothing else: the
// controllers still talk to the real API server.
type countingClient struct {
	client.Client
	log *writeLog
}

func (c *countingClient) record(verb, sub string, obj client.Object, err error) {
	gvk, _ := c.GroupVersionKindFor(obj)
	c.log.add(write{Verb: verb, Kind: gvk.Kind, Namespace: obj.GetNamespace(), Name: obj.GetName(), Subresource: sub, Err: err})
}

func (c *countingClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	err := c.Client.Create(ctx, obj, opts...)
	c.record("create", "", obj, err)
	return err
}

func (c *countingClient) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	err := c.Client.Update(ctx, obj, opts...)
	c.record("update", "", obj, err)
	return err
}

func (c *countingClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	err := c.Client.Patch(ctx, obj, patch, opts...)
	c.record("patch", "", obj, err)
	return err
}

func (c *countingClient) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	err := c.Client.Delete(ctx, obj, opts...)
	c.record("delete", "", obj, err)
	return err
}

func (c *countingClient) Status() client.SubResourceWriter {
	return &countingStatus{SubResourceWriter: c.Client.Status(), c: c}
}

type countingStatus struct {
	client.SubResourceWriter
	c *countingClient
}

func (s *countingStatus) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	err := s.SubResourceWriter.Update(ctx, obj, opts...)
	s.c.record("update", "status", obj, err)
	return err
}

func (s *countingStatus) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	err := s.SubResourceWriter.Patch(ctx, obj, patch, opts...)
	s.c.record("patch", "status", obj, err)
	return err
}
