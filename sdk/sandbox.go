package sdk

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"

	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
)

// Sandbox is a Ready claimed sandbox. Its methods are safe for concurrent use.
type Sandbox struct {
	c                *Client
	namespace, claim string
	sandbox          string
	mu               sync.Mutex
	podIPs           []string
	runtime          *Runtime
	// token is the sandbox token from the credentials Secret, once tokenRead (credentials.go).
	token     string
	tokenRead bool
}

func (c *Client) newSandbox(claim *extensionsv1beta1.SandboxClaim) *Sandbox {
	return &Sandbox{c: c, namespace: claim.Namespace, claim: claim.Name,
		sandbox: claim.Status.Sandbox.Name, podIPs: claim.Status.Sandbox.PodIPs}
}

// Namespace of the claim and its Sandbox.
func (s *Sandbox) Namespace() string { return s.namespace }

// ClaimName is the SandboxClaim's name.
func (s *Sandbox) ClaimName() string { return s.claim }

// SandboxName is the name of the Sandbox bound to the claim.
func (s *Sandbox) SandboxName() string { return s.sandbox }

// PodIPs are the sandbox Pod's addresses as last observed (they change after Resume).
func (s *Sandbox) PodIPs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.podIPs...)
}

// Runtime returns the connection to the sandbox's runtime: through the router when
// Options.RouterURL is set, else straight to the first pod IP on Options.RuntimePort (and
// Options.GRPCPort for Stream) with the sandbox's token from its credentials Secret (which the
// caller must be allowed to get) unless Options.Token is set.
func (s *Sandbox) Runtime() (*Runtime, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.runtime != nil {
		return s.runtime, nil
	}
	e, err := s.endpoint(s.c.opts.RuntimePort)
	if err != nil {
		return nil, err
	}
	if s.c.opts.RouterURL == "" {
		e.GRPCAddr = net.JoinHostPort(s.podIPs[0], strconv.Itoa(s.c.opts.GRPCPort))
	}
	rt, err := NewRuntime(e)
	if err != nil {
		return nil, err
	}
	s.runtime = rt
	return rt, nil
}

// Files returns the sandbox's file API (sandboxd's REST /v1/files): through the router when
// Options.RouterURL is set, else straight to the first pod IP on Options.RESTPort.
func (s *Sandbox) Files() (*Files, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, err := s.endpoint(s.c.opts.RESTPort)
	if err != nil {
		return nil, err
	}
	return NewFiles(e)
}

// endpoint is how to reach the sandbox's port: through the router when Options.RouterURL is set,
// else at the first pod IP with the sandbox's token (directToken). Call it with s.mu held.
func (s *Sandbox) endpoint(port int) (Endpoint, error) {
	e := Endpoint{Token: s.c.opts.Token, HTTPClient: s.c.opts.HTTPClient}
	if s.c.opts.RouterURL != "" {
		e.URL, e.Sandbox, e.Namespace, e.Port = s.c.opts.RouterURL, s.sandbox, s.namespace, port
		return e, nil
	}
	if len(s.podIPs) == 0 {
		return Endpoint{}, fmt.Errorf("sandbox %s/%s has no pod IP yet; set Options.RouterURL to go through the router", s.namespace, s.sandbox)
	}
	tok, err := s.directToken()
	if err != nil {
		return Endpoint{}, err
	}
	e.Token = tok
	e.URL = "http://" + net.JoinHostPort(s.podIPs[0], strconv.Itoa(port))
	return e, nil
}

// Release deletes the claim, which deletes the sandbox. Deleting a claim already gone succeeds.
func (s *Sandbox) Release(ctx context.Context) error {
	s.Close()
	claim := &extensionsv1beta1.SandboxClaim{}
	claim.Namespace, claim.Name = s.namespace, s.claim
	if err := s.c.kube.Delete(ctx, claim); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("releasing claim %s/%s: %w", s.namespace, s.claim, err)
	}
	return nil
}

// Close drops idle runtime connections. The claim stays; use Release to delete it.
func (s *Sandbox) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.runtime != nil {
		s.runtime.http.CloseIdleConnections()
		s.runtime = nil
	}
}

// Suspend sets the Sandbox's operatingMode to Suspended and waits until its Pod is gone
// (condition Suspended=True). Storage and Service are kept.
func (s *Sandbox) Suspend(ctx context.Context) error {
	_, err := s.setMode(ctx, agentsv1beta1.SandboxOperatingModeSuspended, agentsv1beta1.SandboxConditionSuspended)
	if err == nil {
		s.Close()
	}
	return err
}

// Resume sets the operatingMode back to Running and waits until the Sandbox is Ready again; the
// new Pod's IPs replace the old ones.
func (s *Sandbox) Resume(ctx context.Context) error {
	sb, err := s.setMode(ctx, agentsv1beta1.SandboxOperatingModeRunning, agentsv1beta1.SandboxConditionReady)
	if err != nil {
		return err
	}
	s.Close()
	s.mu.Lock()
	s.podIPs = append([]string(nil), sb.Status.PodIPs...)
	s.mu.Unlock()
	return nil
}

// setMode patches spec.operatingMode and waits for condType=True at the patched generation.
func (s *Sandbox) setMode(ctx context.Context, mode agentsv1beta1.SandboxOperatingMode, condType string) (*agentsv1beta1.Sandbox, error) {
	sb := &agentsv1beta1.Sandbox{}
	sb.Namespace, sb.Name = s.namespace, s.sandbox
	patch := []byte(fmt.Sprintf(`{"spec":{"operatingMode":%q}}`, mode))
	w := &waiter{object: "Sandbox", namespace: s.namespace, name: s.sandbox}
	if err := s.c.kube.Patch(ctx, sb, client.RawPatch("application/merge-patch+json", patch)); err != nil {
		if client.IgnoreNotFound(err) == nil {
			return nil, w.fail(ErrSandboxGone, "setting operatingMode "+string(mode), err)
		}
		return nil, fmt.Errorf("setting operatingMode %s on sandbox %s/%s: %w", mode, s.namespace, s.sandbox, err)
	}
	lw := newListWatch(s.c.kube, s.namespace, s.sandbox, func() client.ObjectList { return &agentsv1beta1.SandboxList{} })
	obj, err := w.until(ctx, lw, &agentsv1beta1.Sandbox{}, w.sandboxCondition(condType, sb.Generation))
	if err != nil {
		return nil, err
	}
	return obj.(*agentsv1beta1.Sandbox), nil
}
