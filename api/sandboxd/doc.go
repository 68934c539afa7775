// Package sandboxd holds the names through which the control plane configures sandboxd: the
// environment variables the Sandbox controller sets on a sandbox's containers, and the REST port
// the controller and the router call. sandboxd's own flags read the same names, so no name is
// spelled twice in the tree.
package sandboxd

import "time"

// Environment variables set by the control plane and read by sandboxd (cmd/sandboxd).
const (
	// TokenEnv carries the sandbox's own bearer token: every API call but health needs it.
	TokenEnv = "SANDBOXD_TOKEN"
	// ControlTokenEnv carries the token that only the controller knows besides sandboxd: it
	// authorizes claim settings and calls to an unclaimed warm member.
	ControlTokenEnv = "SANDBOXD_CONTROL_TOKEN"
	// RequireClaimEnv ("true") starts sandboxd locked: until claim settings arrive with the
	// control token, it answers only health and control-token calls. Set on warm-pool members.
	RequireClaimEnv = "SANDBOXD_REQUIRE_CLAIM"
	// EnvdPortEnv sets the port of E2B's in-sandbox protocol (0 turns it off).
	EnvdPortEnv = "SANDBOXD_ENVD_PORT"
	// EnvdAccessTokenEnv is an extra token E2B clients may send as X-Access-Token (besides
	// TokenEnv's); signed /files URLs are then made with it.
	EnvdAccessTokenEnv = "SANDBOXD_ENVD_ACCESS_TOKEN"
	// InterpreterPortEnv sets the port of the code interpreter E2B's @e2b/code-interpreter SDK
	// calls (InterpreterPort in a code-interpreter template; 0, the default, turns it off).
	InterpreterPortEnv = "SANDBOXD_INTERPRETER_PORT"
	// AllowUnauthenticatedEnv ("true") lets sandboxd serve without a sandbox token. Development
	// only: without it, and without a token, sandboxd refuses to start.
	AllowUnauthenticatedEnv = "SANDBOXD_ALLOW_UNAUTHENTICATED"
	// AcceptPortForwardEnv ("true" by default) serves calls without a credential when they come
	// through the API server's port-forward to the sandbox's Pod, as if they carried the sandbox
	// token: never the control token's calls, never on a locked warm member.
	AcceptPortForwardEnv = "SANDBOXD_ACCEPT_PORT_FORWARD"
	// AllowUnauthenticatedNetworkEnv ("true") serves calls without a credential that come over the
	// pod network, as upstream's sandboxes do; only NetworkPolicy then limits who may. The
	// Sandbox controller sets it with --sandboxd-allow-unauthenticated-network (the
	// upstream-unauthenticated-migration profile). Calls from inside the Pod still need a token.
	AllowUnauthenticatedNetworkEnv = "SANDBOXD_ALLOW_UNAUTHENTICATED_NETWORK"

	// RootDirEnv sets the sandbox root (default DefaultRootDir).
	RootDirEnv = "SANDBOXD_ROOT_DIR"
	// RESTPortEnv, GRPCPortEnv and LegacyPortEnv move sandboxd's listeners (0 turns the legacy
	// one off).
	RESTPortEnv   = "SANDBOXD_REST_PORT"
	GRPCPortEnv   = "SANDBOXD_GRPC_PORT"
	LegacyPortEnv = "SANDBOXD_LEGACY_PORT"
	// AllowTokenInRuntimeEnvEnv ("true") lets sandboxd serve although the container runtime shows
	// the container spec's environment, its tokens included, to the code it runs (stock gVisor's
	// /proc/gvisor/spec_environ); without it sandboxd refuses to start there.
	AllowTokenInRuntimeEnvEnv = "SANDBOXD_ALLOW_TOKEN_IN_RUNTIME_ENV"
	// SecretEnvPrefix starts every variable sandboxd keeps from the commands it runs: its tokens
	// and its own configuration never reach a child's environment.
	SecretEnvPrefix = "SANDBOXD_"
)

// Bring your own image (docs/byo-image.md): the Sandbox controller copies sandboxd out of its
// --sandboxd-image into the Pod and starts the chosen container through it with --preflight.
const (
	// BinaryPath is where every Paddock sandbox image holds sandboxd, and so where the controller's
	// --sandboxd-image must hold it.
	BinaryPath = "/usr/local/bin/sandboxd"
	// PreflightExitCode is sandboxd's exit code when --preflight finds the container cannot host
	// it (sysexits' EX_CONFIG).
	PreflightExitCode = 78
	// PreflightMessagePrefix starts the termination message a failed preflight writes; the
	// Sandbox controller turns such a message into Ready=False, reason ImageIncompatible.
	PreflightMessagePrefix = "sandboxd preflight: "
)

// RESTPort is sandboxd's REST API port (claim settings, /v1/...).
const RESTPort = 8080

// ClaimSettingsPath is where the claim controller binds sandboxd to a claim (PUT) and asks what
// it is bound to (GET), with the control token (docs/design/sandboxd-claim-settings.md).
const ClaimSettingsPath = "/v1/claim-settings"

// GRPCPort is sandboxd's default gRPC port (process.v1.ProcessService).
const GRPCPort = 9090

// LegacyPort is sandboxd's default port of the legacy Python-runtime API.
const LegacyPort = 8888

// DefaultRootDir is sandboxd's default sandbox root.
const DefaultRootDir = "/workspace"

// EnvdPort is the port E2B's SDKs call a sandbox's daemon on (envd's fixed port).
const EnvdPort = 49983

// InterpreterPort is the port @e2b/code-interpreter calls the code interpreter on.
const InterpreterPort = 49999

// MatplotlibFontCacheDir is where the code-interpreter image keeps matplotlib's font cache,
// built with the image (internal/envimage); the interpreter's Python kernel copies it into the
// user's matplotlib cache directory before matplotlib's first import, which would otherwise
// spend seconds building it (over ten under gVisor).
const MatplotlibFontCacheDir = "/usr/share/paddock/matplotlib"

// Activity endpoints (scale to zero, docs/compatibility.md "Idle policy"). Both take the sandbox
// token or the control token; neither counts as activity itself except keepalive.
const (
	// ActivityPath (GET) answers an Activity: what the idle controller asks before suspending.
	ActivityPath = "/v1/activity"
	// KeepalivePath (POST) records activity now, for clients that are busy elsewhere, and
	// answers the resulting Activity.
	KeepalivePath = "/v1/keepalive"
)

// Activity is the JSON body of ActivityPath and KeepalivePath.
type Activity struct {
	// lastActivity is when sandboxd last served an API call (or keepalive) or saw a process
	// start or exit; the daemon's start time before any.
	// +required
	LastActivity time.Time `json:"lastActivity"`
	// processes counts the commands still running: a running command is activity, however quiet.
	// +required
	Processes int32 `json:"processes"`
	// streams counts the API calls in flight (output streams, uploads, downloads).
	// +required
	Streams int32 `json:"streams"`
}

// Busy reports whether something runs now, so the sandbox is active whatever LastActivity says.
func (a Activity) Busy() bool { return a.Processes > 0 || a.Streams > 0 }
