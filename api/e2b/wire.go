package e2b

import (
	"encoding/json"

	"github.com/paddock-dev/paddock/api/proto/envd/process/processpbconnect"
	"github.com/paddock-dev/paddock/api/sandboxd"
)

// Wire names of E2B's protocol (shared/reference/e2b.md §1.1-1.3).
const (
	// APIKeyHeader carries the API key on every control-plane request.
	APIKeyHeader = "X-Api-Key"
	// SandboxIDHeader and SandboxPortHeader route a data-plane request (E2B_SANDBOX_URL mode).
	SandboxIDHeader   = "E2b-Sandbox-Id"
	SandboxPortHeader = "E2b-Sandbox-Port"
	// AccessTokenHeader carries the sandbox's envdAccessToken on data-plane requests.
	AccessTokenHeader = "X-Access-Token"
	// TrafficAccessTokenHeader is E2B's header for user-port traffic; it carries the same token.
	TrafficAccessTokenHeader = "E2b-Traffic-Access-Token"
	// NextTokenHeader carries the cursor of the next list page; absent on the last page.
	NextTokenHeader = "X-Next-Token"
	// TotalRunningHeader is the number of running sandboxes matching a list.
	TotalRunningHeader = "X-Total-Running"
	// EnvdPort is the port of the in-sandbox daemon (sandboxd's --envd-port default).
	EnvdPort = sandboxd.EnvdPort
	// InterpreterPort is the code interpreter's port (@e2b/code-interpreter's fixed port), served
	// by sandboxd with --interpreter-port and reached like envd: through the data plane with the
	// sandbox token.
	InterpreterPort = sandboxd.InterpreterPort
	// InterpreterTemplate is @e2b/code-interpreter's default templateID.
	InterpreterTemplate = "code-interpreter-v1"
	// EnvdVersion is the envd version reported to the SDK. It is a feature switch there: 0.5.7 and
	// above lets the SDK skip the injected "user" username and use octet-stream uploads.
	EnvdVersion = "0.5.7"
	// DefaultTimeoutSeconds is the sandbox lifetime when create sends none.
	DefaultTimeoutSeconds = 300
	// DefaultTemplate is the SDK's default templateID.
	DefaultTemplate = "base"
	// ClientID is the value of E2B's deprecated, required clientID field.
	ClientID = "paddock"
)

// ProbePath is the daemon call that proves it accepts the sandbox's requests: an authenticated
// unary Connect RPC. GET /health would not do: a locked warm member answers it before the
// controller has bound and unlocked it.
const ProbePath = processpbconnect.ProcessListProcedure

// State values of a sandbox.
const (
	StateRunning = "running"
	StatePaused  = "paused"
)

// OnTimeout values of SandboxDetail.lifecycle.
const (
	OnTimeoutKill  = "kill"
	OnTimeoutPause = "pause"
)

// CreateRequest is the body of create: NewSandbox (v1) and NewSandboxV2; v2 only drops "secure".
type CreateRequest struct {
	TemplateID          string            `json:"templateID"`
	Timeout             *int64            `json:"timeout,omitempty"`
	Metadata            map[string]string `json:"metadata,omitempty"`
	EnvVars             map[string]string `json:"envVars,omitempty"`
	Secure              *bool             `json:"secure,omitempty"`
	AllowInternetAccess *bool             `json:"allow_internet_access,omitempty"`
	AutoPause           *bool             `json:"autoPause,omitempty"`
	// AutoPauseMemory is accepted and has no effect: Paddock keeps files, not memory.
	AutoPauseMemory *bool              `json:"autoPauseMemory,omitempty"`
	AutoResume      *AutoResumeOptions `json:"autoResume,omitempty"`
	MCP             json.RawMessage    `json:"mcp,omitempty"`
	Network         json.RawMessage    `json:"network,omitempty"`
	VolumeMounts    json.RawMessage    `json:"volumeMounts,omitempty"`
}

// AutoResumeOptions is NewSandbox's autoResume object.
type AutoResumeOptions struct {
	Enabled *bool `json:"enabled,omitempty"`
}

// ConnectRequest is the body of connect, resume and pause; memory is accepted and has no effect
// (no memory snapshots).
type ConnectRequest struct {
	Timeout *int64 `json:"timeout,omitempty"`
	Memory  *bool  `json:"memory,omitempty"`
}

// TimeoutRequest is the body of setTimeout.
type TimeoutRequest struct {
	Timeout *int64 `json:"timeout"`
}

// Sandbox is the create and connect response.
type Sandbox struct {
	SandboxID       string `json:"sandboxID"`
	TemplateID      string `json:"templateID"`
	ClientID        string `json:"clientID"`
	EnvdVersion     string `json:"envdVersion"`
	EnvdAccessToken string `json:"envdAccessToken,omitempty"`
	// TrafficAccessToken is the same sandbox token: the code-interpreter SDK sends it in
	// TrafficAccessTokenHeader on every port-49999 call, X-Access-Token on /execute only.
	TrafficAccessToken string  `json:"trafficAccessToken,omitempty"`
	Domain             *string `json:"domain"`
	Alias              string  `json:"alias,omitempty"`
}

// SandboxDetail is the GET response; ListedSandbox is the same without tokens and domain.
type SandboxDetail struct {
	SandboxID       string            `json:"sandboxID"`
	TemplateID      string            `json:"templateID"`
	Alias           string            `json:"alias,omitempty"`
	ClientID        string            `json:"clientID"`
	StartedAt       string            `json:"startedAt"`
	EndAt           string            `json:"endAt"`
	EnvdVersion     string            `json:"envdVersion"`
	EnvdAccessToken string            `json:"envdAccessToken,omitempty"`
	Domain          *string           `json:"domain,omitempty"`
	CPUCount        int64             `json:"cpuCount"`
	MemoryMB        int64             `json:"memoryMB"`
	DiskSizeMB      int64             `json:"diskSizeMB"`
	Metadata        map[string]string `json:"metadata,omitempty"`
	State           string            `json:"state"`
	Lifecycle       *LifecycleDetail  `json:"lifecycle,omitempty"`
	// Network is the egress configuration as create or the last update gave it; omitted when
	// none was given.
	Network             *NetworkConfig `json:"network,omitempty"`
	AllowInternetAccess *bool          `json:"allowInternetAccess,omitempty"`
}

// ListedSandbox is an item of the list response: SandboxDetail without the token and domain.
type ListedSandbox struct {
	SandboxID   string            `json:"sandboxID"`
	TemplateID  string            `json:"templateID"`
	ClientID    string            `json:"clientID"`
	StartedAt   string            `json:"startedAt"`
	EndAt       string            `json:"endAt"`
	EnvdVersion string            `json:"envdVersion"`
	CPUCount    int64             `json:"cpuCount"`
	MemoryMB    int64             `json:"memoryMB"`
	DiskSizeMB  int64             `json:"diskSizeMB"`
	Metadata    map[string]string `json:"metadata,omitempty"`
	State       string            `json:"state"`
}

// Listed is d as the list response shows it.
func (d SandboxDetail) Listed() ListedSandbox {
	return ListedSandbox{SandboxID: d.SandboxID, TemplateID: d.TemplateID, ClientID: d.ClientID,
		StartedAt: d.StartedAt, EndAt: d.EndAt, EnvdVersion: d.EnvdVersion, CPUCount: d.CPUCount,
		MemoryMB: d.MemoryMB, DiskSizeMB: d.DiskSizeMB, Metadata: d.Metadata, State: d.State}
}

// LifecycleDetail is SandboxDetail.lifecycle: what the timeout does.
type LifecycleDetail struct {
	OnTimeout  string `json:"onTimeout"`
	AutoResume bool   `json:"autoResume"`
}

// Error is E2B's Error schema, the body of every refusal of the control plane, the data plane
// and envd's REST endpoints; the SDK reads code (404 on kill, 409 on pause) from it.
type Error struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// Template is one entry of GET /templates: a template a key's namespace can create sandboxes
// from. Paddock serves each SandboxWarmPool as one (shared/reference/e2b-next.md §6 names the
// build API; the list's fields are E2B's Template schema).
type Template struct {
	TemplateID    string    `json:"templateID"`
	BuildID       string    `json:"buildID"`
	CPUCount      int64     `json:"cpuCount"`
	MemoryMB      int64     `json:"memoryMB"`
	DiskSizeMB    int64     `json:"diskSizeMB"`
	Public        bool      `json:"public"`
	Aliases       []string  `json:"aliases"`
	Names         []string  `json:"names"`
	CreatedAt     string    `json:"createdAt"`
	UpdatedAt     string    `json:"updatedAt"`
	CreatedBy     *struct{} `json:"createdBy"`
	LastSpawnedAt *string   `json:"lastSpawnedAt"`
	SpawnCount    int64     `json:"spawnCount"`
	BuildCount    int64     `json:"buildCount"`
	EnvdVersion   string    `json:"envdVersion"`
	BuildStatus   string    `json:"buildStatus"`
}

// TemplateAlias is the answer of GET /templates/aliases/{alias} (the SDK's Template.exists).
type TemplateAlias struct {
	TemplateID string `json:"templateID"`
	Public     bool   `json:"public"`
}

// Build states of a template.
const (
	BuildStatusReady = "ready"
	BuildStatusError = "error"
)

// NetworkConfig is create's `network` and getInfo's `network` (SandboxNetworkConfig).
type NetworkConfig struct {
	AllowOut    []string                 `json:"allowOut,omitempty"`
	DenyOut     []string                 `json:"denyOut,omitempty"`
	EgressProxy json.RawMessage          `json:"egressProxy,omitempty"`
	Rules       map[string][]NetworkRule `json:"rules,omitempty"`
	// Ingress options: accepted and stored; Paddock always requires the sandbox token on
	// every port, and neither rewrites Host nor speaks TLS to sandbox ports.
	AllowPublicTraffic *bool   `json:"allowPublicTraffic,omitempty"`
	MaskRequestHost    *string `json:"maskRequestHost,omitempty"`
	HTTPSPorts         []int   `json:"httpsPorts,omitempty"`
}

// NetworkRule is one entry of a rules domain: an optional header transform.
type NetworkRule struct {
	Transform *NetworkTransform `json:"transform,omitempty"`
}

// NetworkTransform is a rule's transform: headers added to, or replacing those of, every request
// to the rule's domain.
type NetworkTransform struct {
	Headers map[string]string `json:"headers,omitempty"`
}

// NetworkUpdate is the body of PUT /sandboxes/{id}/network: it replaces the whole egress
// configuration; omitted fields are cleared.
type NetworkUpdate struct {
	AllowOut            []string                 `json:"allowOut,omitempty"`
	DenyOut             []string                 `json:"denyOut,omitempty"`
	EgressProxy         json.RawMessage          `json:"egressProxy,omitempty"`
	Rules               map[string][]NetworkRule `json:"rules,omitempty"`
	AllowInternetAccess *bool                    `json:"allow_internet_access,omitempty"`
}

// AllTraffic is E2B's ALL_TRAFFIC: the denyOut entry that makes allowOut an allow-list.
const AllTraffic = "0.0.0.0/0"

// SnapshotRequest is the body of createSnapshot: an optional name, "alias", "alias:tag" or
// "namespace/alias:tag" (E2B's "team-slug/alias:tag").
type SnapshotRequest struct {
	Name string `json:"name,omitempty"`
}

// SnapshotInfo is a snapshot as createSnapshot and listSnapshots answer it. SnapshotID is what
// Sandbox.create takes as templateID and deleteSnapshot as the template ID.
type SnapshotInfo struct {
	SnapshotID string   `json:"snapshotID"`
	Names      []string `json:"names"`
}

// ForkRequest is the body of fork; both keys are omitted unless given.
type ForkRequest struct {
	// Timeout is each fork's lifetime in seconds; DefaultForkTimeoutSeconds when omitted.
	Timeout *int64 `json:"timeout,omitempty"`
	// Count is how many forks to start; 1 when omitted, at most MaxForkCount.
	Count *int64 `json:"count,omitempty"`
}

// ForkResult is one entry of fork's answer: exactly one of Sandbox and Error.
type ForkResult struct {
	Sandbox *Sandbox `json:"sandbox,omitempty"`
	Error   *Error   `json:"error,omitempty"`
}

// Fork bounds, as E2B's API has them: forks live 15 s unless the request says otherwise.
const (
	DefaultForkTimeoutSeconds = 15
	MaxForkCount              = 100
)

// DefaultSnapshotTag is the tag of a snapshot named without one, and of every unnamed snapshot.
const DefaultSnapshotTag = "default"
