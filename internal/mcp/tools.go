package mcp

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	"github.com/paddock-dev/paddock/sdk"
)

// Wait bounds of the tools that wait for a sandbox to change, in seconds.
const (
	defaultWaitSeconds = 120
	maxWaitSeconds     = 600
)

// States of SandboxInfo.State.
const (
	StateReady     = "Ready"
	StatePending   = "Pending"
	StateSuspended = "Suspended"
	StateDeleting  = "Deleting"
)

// SandboxInfo describes one sandbox (a SandboxClaim and the Sandbox bound to it).
type SandboxInfo struct {
	Name      string `json:"name" jsonschema:"the sandbox's name (its SandboxClaim); pass it as 'sandbox' or 'name' to the other tools"`
	Pool      string `json:"pool" jsonschema:"the warm pool it was claimed from"`
	State     string `json:"state" jsonschema:"Ready (commands and files work), Pending (still starting), Suspended (resume_sandbox first) or Deleting"`
	Reason    string `json:"reason,omitempty" jsonschema:"why it is not Ready, from its Ready condition"`
	Message   string `json:"message,omitempty" jsonschema:"the controller's message about its state"`
	InSession bool   `json:"in_session" jsonschema:"true when this MCP session claimed it (and so deletes it when the session ends)"`
	CreatedAt string `json:"created_at" jsonschema:"when it was claimed, RFC 3339"`
}

// ClaimInput is claim_sandbox's input.
type ClaimInput struct {
	Pool           string            `json:"pool" jsonschema:"the warm pool to claim from; list_pools lists them"`
	Name           string            `json:"name,omitempty" jsonschema:"a name for the sandbox (lowercase letters, digits and '-'); generated from the pool name when empty"`
	Env            map[string]string `json:"env,omitempty" jsonschema:"environment variables for the sandbox, if the pool's template allows them"`
	TimeoutSeconds int               `json:"timeout_seconds,omitempty" jsonschema:"how long to wait for the sandbox to be Ready (default 120, at most 600)"`
}

// NameInput names one sandbox.
type NameInput struct {
	Name string `json:"name" jsonschema:"the sandbox's name, as claim_sandbox or list_sandboxes returned it"`
}

// WaitInput names one sandbox and bounds the wait for it to change.
type WaitInput struct {
	Name           string `json:"name" jsonschema:"the sandbox's name, as claim_sandbox or list_sandboxes returned it"`
	TimeoutSeconds int    `json:"timeout_seconds,omitempty" jsonschema:"how long to wait for the change (default 120, at most 600)"`
}

// ListSandboxesInput selects which sandboxes list_sandboxes returns.
type ListSandboxesInput struct {
	All bool `json:"all,omitempty" jsonschema:"list every sandbox of the namespace's allowed pools, not only this session's"`
}

// SandboxList is list_sandboxes' output.
type SandboxList struct {
	Sandboxes []SandboxInfo `json:"sandboxes"`
}

// PoolInfo describes one warm pool.
type PoolInfo struct {
	Name     string `json:"name"`
	Template string `json:"template" jsonschema:"the SandboxTemplate its sandboxes are made from"`
	Replicas int32  `json:"replicas" jsonschema:"how many warm sandboxes it keeps"`
	Ready    int32  `json:"ready" jsonschema:"how many are ready to be claimed now (a claim from an empty pool waits for a new one)"`
}

// PoolList is list_pools' output.
type PoolList struct {
	Pools []PoolInfo `json:"pools"`
}

// DeleteOutput is delete_sandbox's output.
type DeleteOutput struct {
	Name    string `json:"name"`
	Deleted bool   `json:"deleted" jsonschema:"true when the sandbox is being deleted (its files and processes are gone)"`
}

func (s *Server) addLifecycleTools() {
	mcp.AddTool(s.mcp, &mcp.Tool{Name: "claim_sandbox",
		Description: "Claim a new isolated Linux sandbox from a warm pool and wait until it is Ready. " +
			"Returns its name, which every other tool takes. The sandbox is deleted when this session ends unless the server keeps sandboxes.",
	}, s.claimSandbox)
	mcp.AddTool(s.mcp, &mcp.Tool{Name: "list_pools",
		Description: "List the warm pools sandboxes can be claimed from, with how many warm sandboxes each has ready.",
		Annotations: readOnly(),
	}, s.listPools)
	mcp.AddTool(s.mcp, &mcp.Tool{Name: "list_sandboxes",
		Description: "List this session's sandboxes (or, with all=true, every sandbox of the namespace's allowed pools) with their state.",
		Annotations: readOnly(),
	}, s.listSandboxes)
	mcp.AddTool(s.mcp, &mcp.Tool{Name: "get_sandbox",
		Description: "Show one sandbox's state: Ready, Pending, Suspended or Deleting, and why.",
		Annotations: readOnly(),
	}, s.getSandbox)
	mcp.AddTool(s.mcp, &mcp.Tool{Name: "delete_sandbox",
		Description: "Delete a sandbox with everything in it (files, processes). It cannot be undone.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr.To(true), IdempotentHint: true},
	}, s.deleteSandbox)
	mcp.AddTool(s.mcp, &mcp.Tool{Name: "suspend_sandbox",
		Description: "Suspend a sandbox: its processes stop and its compute is freed; files on its persistent volumes are kept. resume_sandbox brings it back.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr.To(true), IdempotentHint: true},
	}, s.suspendSandbox)
	mcp.AddTool(s.mcp, &mcp.Tool{Name: "resume_sandbox",
		Description: "Resume a suspended sandbox and wait until it is Ready again.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr.To(false), IdempotentHint: true},
	}, s.resumeSandbox)
}

func readOnly() *mcp.ToolAnnotations { return &mcp.ToolAnnotations{ReadOnlyHint: true} }

// waitContext bounds ctx by seconds (the default when 0).
func waitContext(ctx context.Context, seconds int) (context.Context, context.CancelFunc, error) {
	switch {
	case seconds == 0:
		seconds = defaultWaitSeconds
	case seconds < 0 || seconds > maxWaitSeconds:
		return nil, nil, fmt.Errorf("timeout_seconds=%d: must be between 1 and %d", seconds, maxWaitSeconds)
	}
	ctx, cancel := context.WithTimeout(ctx, time.Duration(seconds)*time.Second)
	return ctx, cancel, nil
}

func (s *Server) claimSandbox(ctx context.Context, req *mcp.CallToolRequest, in ClaimInput) (*mcp.CallToolResult, SandboxInfo, error) {
	if in.Pool == "" {
		return nil, SandboxInfo{}, s.poolError(ctx, "pool is required")
	}
	if !s.poolAllowed(in.Pool) {
		return nil, SandboxInfo{}, s.poolError(ctx, fmt.Sprintf("pool %q is not one this server may claim from", in.Pool))
	}
	id, err := s.sessionID(req.Session)
	if err != nil {
		return nil, SandboxInfo{}, err
	}
	ctx, cancel, err := waitContext(ctx, in.TimeoutSeconds)
	if err != nil {
		return nil, SandboxInfo{}, err
	}
	defer cancel()
	o := sdk.ClaimOptions{WarmPool: in.Pool, Namespace: s.cfg.Namespace, Name: in.Name,
		Labels: map[string]string{extensionsv1beta1.MCPSessionLabel: id}}
	if in.Name == "" {
		o.GenerateName = in.Pool + "-"
	}
	for _, k := range slices.Sorted(maps.Keys(in.Env)) {
		o.Env = append(o.Env, extensionsv1beta1.EnvVar{Name: k, Value: in.Env[k]})
	}
	sb, err := s.sdk.Claim(ctx, o)
	switch {
	case errors.Is(err, sdk.ErrPoolNotFound):
		return nil, SandboxInfo{}, s.poolError(ctx, fmt.Sprintf("pool %q not found in namespace %q", in.Pool, s.cfg.Namespace))
	case apierrors.IsAlreadyExists(err):
		return nil, SandboxInfo{}, fmt.Errorf("a sandbox named %q already exists; pick another name or leave name empty", in.Name)
	case errors.Is(err, sdk.ErrNotReady):
		return nil, SandboxInfo{}, fmt.Errorf("the sandbox was not Ready within the timeout and was deleted; claim again with a larger timeout_seconds, or check list_pools for ready sandboxes: %w", err)
	case err != nil:
		return nil, SandboxInfo{}, err
	}
	s.cfg.Logger.Info("claimed a sandbox", "session", id, "claim", sb.ClaimName(), "pool", in.Pool)
	info, err := s.describe(ctx, req.Session, sb.ClaimName())
	return nil, info, err
}

// poolError is a tool error about the pool, followed by the pools that can be claimed from.
func (s *Server) poolError(ctx context.Context, what string) error {
	pools, err := s.pools(ctx)
	if err != nil {
		return fmt.Errorf("%s; listing the pools failed too: %w", what, err)
	}
	if len(pools) == 0 {
		return fmt.Errorf("%s; namespace %q has no warm pool this server may claim from: ask an operator to create one", what, s.cfg.Namespace)
	}
	names := make([]string, 0, len(pools))
	for _, p := range pools {
		names = append(names, p.Name)
	}
	return fmt.Errorf("%s; the pools are: %s (pass one as pool)", what, strings.Join(names, ", "))
}

func (s *Server) pools(ctx context.Context) ([]PoolInfo, error) {
	list := &extensionsv1beta1.SandboxWarmPoolList{}
	if err := s.kube.List(ctx, list, client.InNamespace(s.cfg.Namespace)); err != nil {
		return nil, fmt.Errorf("listing warm pools in namespace %q: %w", s.cfg.Namespace, err)
	}
	out := []PoolInfo{}
	for _, p := range list.Items {
		if s.poolAllowed(p.Name) {
			out = append(out, PoolInfo{Name: p.Name, Template: p.Spec.TemplateRef.Name,
				Replicas: ptr.Deref(p.Spec.Replicas, 0), Ready: p.Status.ReadyReplicas})
		}
	}
	slices.SortFunc(out, func(a, b PoolInfo) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

func (s *Server) listPools(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, PoolList, error) {
	pools, err := s.pools(ctx)
	return nil, PoolList{Pools: pools}, err
}

func (s *Server) listSandboxes(ctx context.Context, req *mcp.CallToolRequest, in ListSandboxesInput) (*mcp.CallToolResult, SandboxList, error) {
	list, err := s.sandboxes(ctx, req.Session, !in.All)
	return nil, SandboxList{Sandboxes: list}, err
}

// sandboxes lists the namespace's claims of allowed pools, only the session's when sessionOnly.
func (s *Server) sandboxes(ctx context.Context, ss *mcp.ServerSession, sessionOnly bool) ([]SandboxInfo, error) {
	id := s.knownSession(ss)
	out := []SandboxInfo{}
	if sessionOnly && id == "" {
		return out, nil // this session has claimed nothing yet
	}
	opts := []client.ListOption{client.InNamespace(s.cfg.Namespace)}
	if sessionOnly {
		opts = append(opts, client.MatchingLabels{extensionsv1beta1.MCPSessionLabel: id})
	}
	claims := &extensionsv1beta1.SandboxClaimList{}
	if err := s.kube.List(ctx, claims, opts...); err != nil {
		return nil, fmt.Errorf("listing sandboxes in namespace %q: %w", s.cfg.Namespace, err)
	}
	sandboxes := &agentsv1beta1.SandboxList{}
	if err := s.kube.List(ctx, sandboxes, client.InNamespace(s.cfg.Namespace)); err != nil {
		return nil, fmt.Errorf("listing sandboxes in namespace %q: %w", s.cfg.Namespace, err)
	}
	byName := map[string]*agentsv1beta1.Sandbox{}
	for i := range sandboxes.Items {
		byName[sandboxes.Items[i].Name] = &sandboxes.Items[i]
	}
	for i := range claims.Items {
		c := &claims.Items[i]
		if s.poolAllowed(c.Spec.WarmPoolRef.Name) {
			out = append(out, sandboxInfo(c, byName[c.Status.Sandbox.Name], id))
		}
	}
	slices.SortFunc(out, func(a, b SandboxInfo) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// sandboxInfo describes claim and its Sandbox (nil when none is bound or it is gone) for session id.
func sandboxInfo(claim *extensionsv1beta1.SandboxClaim, sb *agentsv1beta1.Sandbox, session string) SandboxInfo {
	info := SandboxInfo{Name: claim.Name, Pool: claim.Spec.WarmPoolRef.Name, State: StatePending,
		InSession: session != "" && claim.Labels[extensionsv1beta1.MCPSessionLabel] == session,
		CreatedAt: claim.CreationTimestamp.UTC().Format(time.RFC3339)}
	if ready := meta.FindStatusCondition(claim.Status.Conditions, extensionsv1beta1.ClaimConditionReady); ready != nil {
		info.Reason, info.Message = ready.Reason, ready.Message
		if ready.Status == metav1.ConditionTrue {
			info.State, info.Reason, info.Message = StateReady, "", ""
		}
	}
	switch {
	case claim.DeletionTimestamp != nil:
		info.State = StateDeleting
	case sb != nil && sb.Spec.OperatingMode == agentsv1beta1.SandboxOperatingModeSuspended:
		info.State, info.Reason, info.Message = StateSuspended, "", "resume_sandbox brings it back"
	}
	return info
}

// claim reads the claim name and refuses one this server may not act on.
func (s *Server) claim(ctx context.Context, name string) (*extensionsv1beta1.SandboxClaim, error) {
	if name == "" {
		return nil, errors.New("name is required: pass a sandbox name from list_sandboxes or claim_sandbox")
	}
	claim := &extensionsv1beta1.SandboxClaim{}
	err := s.kube.Get(ctx, client.ObjectKey{Namespace: s.cfg.Namespace, Name: name}, claim)
	switch {
	case apierrors.IsNotFound(err):
		return nil, fmt.Errorf("sandbox %q not found in namespace %q; list_sandboxes lists the sandboxes, claim_sandbox makes a new one", name, s.cfg.Namespace)
	case err != nil:
		return nil, fmt.Errorf("reading sandbox %q: %w", name, err)
	case !s.poolAllowed(claim.Spec.WarmPoolRef.Name):
		return nil, fmt.Errorf("sandbox %q comes from pool %q, which this server may not act on (pools: %s)", name, claim.Spec.WarmPoolRef.Name, strings.Join(s.cfg.Pools, ", "))
	}
	return claim, nil
}

// describe reads the claim name and its Sandbox.
func (s *Server) describe(ctx context.Context, ss *mcp.ServerSession, name string) (SandboxInfo, error) {
	claim, err := s.claim(ctx, name)
	if err != nil {
		return SandboxInfo{}, err
	}
	var sb *agentsv1beta1.Sandbox
	if claim.Status.Sandbox.Name != "" {
		sb = &agentsv1beta1.Sandbox{}
		err := s.kube.Get(ctx, client.ObjectKey{Namespace: s.cfg.Namespace, Name: claim.Status.Sandbox.Name}, sb)
		switch {
		case apierrors.IsNotFound(err):
			sb = nil
		case err != nil:
			return SandboxInfo{}, fmt.Errorf("reading the Sandbox of %q: %w", name, err)
		}
	}
	return sandboxInfo(claim, sb, s.knownSession(ss)), nil
}

func (s *Server) getSandbox(ctx context.Context, req *mcp.CallToolRequest, in NameInput) (*mcp.CallToolResult, SandboxInfo, error) {
	info, err := s.describe(ctx, req.Session, in.Name)
	return nil, info, err
}

func (s *Server) deleteSandbox(ctx context.Context, _ *mcp.CallToolRequest, in NameInput) (*mcp.CallToolResult, DeleteOutput, error) {
	claim, err := s.claim(ctx, in.Name)
	if err != nil {
		return nil, DeleteOutput{}, err
	}
	if err := s.kube.Delete(ctx, claim); client.IgnoreNotFound(err) != nil {
		return nil, DeleteOutput{}, fmt.Errorf("deleting sandbox %q: %w", in.Name, err)
	}
	s.cfg.Logger.Info("deleted a sandbox", "claim", in.Name)
	return nil, DeleteOutput{Name: in.Name, Deleted: true}, nil
}

func (s *Server) suspendSandbox(ctx context.Context, req *mcp.CallToolRequest, in WaitInput) (*mcp.CallToolResult, SandboxInfo, error) {
	return s.setMode(ctx, req, in, false)
}

func (s *Server) resumeSandbox(ctx context.Context, req *mcp.CallToolRequest, in WaitInput) (*mcp.CallToolResult, SandboxInfo, error) {
	return s.setMode(ctx, req, in, true)
}

func (s *Server) setMode(ctx context.Context, req *mcp.CallToolRequest, in WaitInput, resume bool) (*mcp.CallToolResult, SandboxInfo, error) {
	if _, err := s.claim(ctx, in.Name); err != nil {
		return nil, SandboxInfo{}, err
	}
	wctx, cancel, err := waitContext(ctx, in.TimeoutSeconds)
	if err != nil {
		return nil, SandboxInfo{}, err
	}
	defer cancel()
	sb, err := s.sdk.Lookup(wctx, s.cfg.Namespace, in.Name)
	if err != nil {
		return nil, SandboxInfo{}, err
	}
	set := sb.Suspend
	if resume {
		set = sb.Resume
	}
	if err := set(wctx); err != nil {
		return nil, SandboxInfo{}, err
	}
	if resume {
		// The Sandbox is Ready; the claim's own Ready condition follows it shortly.
		if _, err := s.sdk.Attach(wctx, s.cfg.Namespace, in.Name); err != nil {
			return nil, SandboxInfo{}, err
		}
	}
	info, err := s.describe(ctx, req.Session, in.Name)
	return nil, info, err
}
