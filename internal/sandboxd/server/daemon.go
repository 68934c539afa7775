// Package server is sandboxd's network surface: the gRPC process.v1.ProcessService, the REST
// filesystem and runtime API (/v1/..., with the HTTP form of Start in stream.go), the legacy
// runtime API of the Python runtime (port 8888) and the claim-settings endpoint. Daemon owns the
// state they share.
package server

import (
	"context"
	"errors"
	"net"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"k8s.io/klog/v2"

	"github.com/paddock-dev/paddock/api/sandboxd"
	"github.com/paddock-dev/paddock/internal/portforward"
	"github.com/paddock-dev/paddock/internal/sandboxd/claim"
	"github.com/paddock-dev/paddock/internal/sandboxd/envd"
	"github.com/paddock-dev/paddock/internal/sandboxd/interpreter"
	"github.com/paddock-dev/paddock/internal/sandboxd/pathsafe"
	"github.com/paddock-dev/paddock/internal/sandboxd/process"
)

// Config is the daemon's configuration; cmd/sandboxd fills it from flags and environment.
type Config struct {
	// RootDir is the sandbox root; every path clients send is confined to it.
	RootDir string
	// Token is the sandbox token (api/sandboxd.TokenEnv): every call but health must carry it
	// ("Authorization: Bearer <token>", gRPC metadata authorization, or X-Access-Token).
	Token string
	// EnvdAccessToken, when set, is accepted on the envd listener besides the sandbox token
	// (X-Access-Token, and signed /files URLs are made with it).
	EnvdAccessToken string
	// AllowUnauthenticated lets calls without a token through when Token is empty. Development
	// only: New refuses an empty Token without it.
	AllowUnauthenticated bool
	// AcceptPortForward serves calls without a credential that come through the API server's
	// port-forward (internal/portforward) as if they carried the sandbox token.
	AcceptPortForward bool
	// AllowUnauthenticatedNetwork serves calls without a credential from peers outside the Pod's
	// network namespace as if they carried the sandbox token (the migration profile; only
	// NetworkPolicy limits who they are). Peers inside the Pod still need a token or the
	// port-forward's shape.
	AllowUnauthenticatedNetwork bool
	// ControlToken (api/sandboxd.ControlTokenEnv) is the controller's: it alone authorizes claim
	// settings and calls to a locked daemon, and it passes wherever the sandbox token does.
	ControlToken string
	// RequireClaim starts the daemon locked (api/sandboxd.RequireClaimEnv): until claim
	// settings arrive, only health and control-token calls are served. It needs ControlToken.
	RequireClaim bool
	// MetadataEnvPrefix selects the environment variables GET /v1/metadata shows.
	MetadataEnvPrefix string
	// Environ is the environment processes inherit ("K=V"), normally os.Environ().
	Environ []string
	// StreamChunkSize is the largest output chunk of a Start stream.
	StreamChunkSize int
	// MaxUploadBytes limits one upload; 0 means no limit.
	MaxUploadBytes int64
	// MaxProcesses limits the commands running at once (not their descendants); 0 means no limit.
	MaxProcesses int
	// MaxExecuteOutputBytes limits each stream buffered by Execute and legacy /execute; 0 means no limit.
	MaxExecuteOutputBytes int
	// LegacyExecTimeout bounds legacy POST /execute (SANDBOX_EXEC_TIMEOUT_SECONDS).
	LegacyExecTimeout time.Duration
	// ShutdownTimeout bounds graceful shutdown.
	ShutdownTimeout time.Duration
	// HTTPIdleTimeout is the keep-alive idle timeout of the HTTP servers.
	HTTPIdleTimeout time.Duration
	// ClaimHold bounds how long a locked warm member holds a call that presents the sandbox
	// token, waiting for its claim settings, before it refuses the call (DefaultClaimHold when
	// zero; negative refuses at once). Only the claim's holder is given the token, so such a
	// call means the claim is on its way: the E2B front door's first probe is answered once the
	// controller's settings land, instead of refused and sent again.
	ClaimHold time.Duration
	// WarmCommand, when set, runs once on a locked warm member that serves the envd port, before
	// its claim, so that the claim's first command does not pay for the first exec of its shell
	// (warmexec.go). cmd/sandboxd sets DefaultWarmCommand.
	WarmCommand []string
	// InterpreterPython and InterpreterNode are the commands of the code interpreter's Python and
	// JavaScript kernels (default python3 and node from PATH).
	InterpreterPython, InterpreterNode string
}

// DefaultClaimHold is Config.ClaimHold's default: longer than a claim-settings delivery takes on a
// loaded node, far shorter than a create's timeout.
const DefaultClaimHold = 2 * time.Second

// maxJSONBody bounds the JSON request bodies (legacy /execute, claim settings).
const maxJSONBody = 1 << 20

// Daemon is one running sandboxd.
type Daemon struct {
	cfg      Config
	root     *pathsafe.Root
	procs    *process.Manager
	claims   claim.Store
	metadata map[string]string
	started  time.Time
	ready    atomic.Bool
	// locked is true while RequireClaim holds: no claim settings have been applied yet.
	locked atomic.Bool
	// claimed is closed when the daemon is unlocked; at once for one that starts unlocked.
	claimed chan struct{}
	// holding counts the calls awaitClaim holds now.
	holding atomic.Int32
	// warmed is closed when the warm-up command ended, or at once when none runs.
	warmed   chan struct{}
	activity activity
	// peers classifies the peers of tokenless calls (AcceptPortForward, AllowUnauthenticatedNetwork).
	peers portforward.Recognizer
	// interp is the code interpreter while its listener is served (Serve sets it first).
	interp *interpreter.Server
}

// New opens the sandbox root and prepares the daemon; it serves nothing until Serve.
func New(cfg Config) (*Daemon, error) {
	switch {
	case cfg.Token == "" && !cfg.AllowUnauthenticated:
		return nil, errors.New("no sandbox token: set " + sandboxd.TokenEnv + " (or --token-file), or pass --allow-unauthenticated to serve without authentication (development only)")
	case cfg.RequireClaim && cfg.ControlToken == "":
		return nil, errors.New(sandboxd.RequireClaimEnv + "=true needs a control token to unlock the sandbox: set " + sandboxd.ControlTokenEnv)
	}
	root, err := pathsafe.Open(cfg.RootDir)
	if err != nil {
		return nil, err
	}
	if cfg.MetadataEnvPrefix == "" {
		cfg.MetadataEnvPrefix = "SANDBOX_"
	}
	if cfg.ClaimHold == 0 {
		cfg.ClaimHold = DefaultClaimHold
	}
	d := &Daemon{
		cfg:      cfg,
		root:     root,
		procs:    process.NewManager(cfg.StreamChunkSize),
		metadata: metadataEnv(cfg.Environ, cfg.MetadataEnvPrefix),
		started:  time.Now(),
		claimed:  make(chan struct{}),
		warmed:   make(chan struct{}),
	}
	if !cfg.RequireClaim {
		close(d.claimed)
	}
	d.procs.SetMaxProcesses(cfg.MaxProcesses)
	d.activity.touch(d.started)
	d.ready.Store(true)
	d.locked.Store(cfg.RequireClaim)
	return d, nil
}

// Root is the sandbox root directory.
func (d *Daemon) Root() string { return d.root.Dir() }

// Listeners are the sockets Serve uses; a nil listener leaves that API off.
type Listeners struct {
	GRPC, REST, Legacy net.Listener
	// Envd serves E2B's in-sandbox protocol (Connect over HTTP/1.1 and h2c, /files, /health).
	Envd net.Listener
	// Interpreter serves the code interpreter of @e2b/code-interpreter (internal/sandboxd/interpreter).
	Interpreter net.Listener
}

// EnvdServer returns the E2B envd protocol server over the daemon's root, processes and claim.
// Its calls pass the same Authorize as every other API (so a locked warm member refuses them),
// with --envd-access-token standing for the sandbox token.
func (d *Daemon) EnvdServer() *envd.Server {
	token := d.cfg.Token
	if d.cfg.EnvdAccessToken != "" {
		token = d.cfg.EnvdAccessToken
	}
	// Every authorized envd call is activity (E2B's data plane); its commands count while they
	// run, through the shared process manager.
	authorize := func(creds ...string) error {
		err := d.AuthorizeCredentials(d.e2bCredentials(creds)...)
		if err == nil {
			d.activity.touch(time.Now())
		}
		return err
	}
	return envd.New(envd.Config{
		Root:  d.root,
		Procs: d.procs,
		Environ: func(extra map[string]string) []string {
			return process.MergeEnv(d.cfg.Environ, d.claims.Env(), extra)
		},
		AccessToken:    token,
		Authorize:      authorize,
		AwaitClaim:     func(ctx context.Context, creds []string) { d.awaitClaim(ctx, d.e2bCredentials(creds)) },
		MaxUploadBytes: d.cfg.MaxUploadBytes,
		Ready:          d.ready.Load,
	})
}

// awaitClaim holds a call to a locked daemon that presents the sandbox token until the daemon is
// claimed, for at most ClaimHold and never past ctx; the caller then authorizes the call as
// usual. Calls without the token are not held: they learn nothing and cost nothing more.
func (d *Daemon) awaitClaim(ctx context.Context, creds []string) {
	if !d.locked.Load() || d.cfg.ClaimHold < 0 || !slices.ContainsFunc(creds, func(c string) bool { return tokenEqual(c, d.cfg.Token) }) {
		return
	}
	d.holding.Add(1)
	defer d.holding.Add(-1)
	t := time.NewTimer(d.cfg.ClaimHold)
	defer t.Stop()
	select {
	case <-d.claimed:
	case <-t.C:
	case <-ctx.Done():
	}
}

// e2bCredentials are creds with --envd-access-token, which E2B clients present, standing for
// the sandbox token.
func (d *Daemon) e2bCredentials(creds []string) []string {
	if d.cfg.EnvdAccessToken == "" {
		return creds
	}
	out := make([]string, len(creds))
	for i, c := range creds {
		out[i] = c
		if tokenEqual(c, d.cfg.EnvdAccessToken) {
			out[i] = d.cfg.Token
		}
	}
	return out
}

// Serve serves until ctx ends, then shuts down: health turns 503, processes get SIGTERM then
// SIGKILL, HTTP and gRPC servers stop within ShutdownTimeout.
func (d *Daemon) Serve(ctx context.Context, ls Listeners) error {
	if ls.Interpreter != nil {
		// Before any listener serves: the claim-settings handler warms it.
		d.interp = interpreter.New(interpreter.Config{
			Python: d.cfg.InterpreterPython, Node: d.cfg.InterpreterNode, Dir: d.root.Dir(),
			Environ: func() []string { return process.MergeEnv(d.cfg.Environ, d.claims.Env()) },
		})
	}
	var httpServers []*http.Server
	errs := make(chan error, 5)
	serveHTTP := func(l net.Listener, h http.Handler, protocols *http.Protocols) {
		srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: d.cfg.HTTPIdleTimeout, Protocols: protocols,
			ConnContext: d.peers.ConnContext}
		httpServers = append(httpServers, srv)
		go func() { errs <- srv.Serve(l) }()
	}
	if ls.REST != nil {
		serveHTTP(ls.REST, d.RESTHandler(), nil)
	}
	if ls.Legacy != nil {
		serveHTTP(ls.Legacy, d.LegacyHandler(), nil)
	}
	if ls.Envd != nil {
		e := d.EnvdServer()
		defer e.Close()
		// E2B's SDK speaks HTTP/1.1 over plain http, and HTTP/2 where it can: serve both.
		protocols := new(http.Protocols)
		protocols.SetHTTP1(true)
		protocols.SetUnencryptedHTTP2(true)
		serveHTTP(ls.Envd, e.Handler(), protocols)
	}
	if ls.Interpreter != nil {
		serveHTTP(ls.Interpreter, d.InterpreterHandler(d.interp.Handler()), nil)
		// On a locked warm member too: the kernel starts with the environment of the sandbox's
		// commands (no token) and takes the claim's variables before its first cell.
		go d.interp.Warm()
	}
	if ls.Envd != nil && d.locked.Load() && len(d.cfg.WarmCommand) > 0 {
		go d.warmExec(ctx)
	} else {
		close(d.warmed)
	}
	var grpcServer *grpc.Server
	if ls.GRPC != nil {
		grpcServer = d.GRPCServer()
		go func() { errs <- grpcServer.Serve(ls.GRPC) }()
	}
	if d.cfg.AllowUnauthenticatedNetwork && d.cfg.Token != "" {
		klog.InfoS("WARNING: sandboxd serves calls without a token from the pod network (" + sandboxd.AllowUnauthenticatedNetworkEnv + "): only NetworkPolicy limits who can run commands in this sandbox; the upstream-unauthenticated-migration profile")
	}
	if d.cfg.Token == "" {
		klog.InfoS("WARNING: sandboxd serves WITHOUT AUTHENTICATION (--allow-unauthenticated): anyone who reaches its ports can run commands in this sandbox; development only")
	}
	klog.InfoS("sandboxd serving", "locked", d.locked.Load(), "root", d.root.Dir(), "rest", addr(ls.REST), "grpc", addr(ls.GRPC), "legacy", addr(ls.Legacy), "envd", addr(ls.Envd), "interpreter", addr(ls.Interpreter))

	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-errs:
		klog.ErrorS(serveErr, "listener failed; shutting down")
	}
	d.shutdown(httpServers, grpcServer)
	if serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		return serveErr
	}
	return nil
}

func (d *Daemon) shutdown(httpServers []*http.Server, grpcServer *grpc.Server) {
	d.ready.Store(false)
	timeout := d.cfg.ShutdownTimeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	d.procs.Shutdown(ctx)
	if d.interp != nil {
		// Running cells end (ExecutionAborted), so their streams do not hold the HTTP shutdown.
		d.interp.Close()
	}
	for _, srv := range httpServers {
		if err := srv.Shutdown(ctx); err != nil {
			srv.Close()
		}
	}
	if grpcServer != nil {
		stopped := make(chan struct{})
		go func() { grpcServer.GracefulStop(); close(stopped) }()
		select {
		case <-stopped:
		case <-ctx.Done():
			grpcServer.Stop()
		}
	}
	d.root.Close()
	klog.InfoS("sandboxd stopped")
}

func addr(l net.Listener) string {
	if l == nil {
		return "off"
	}
	return l.Addr().String()
}

// sensitiveName matches environment variable names GET /v1/metadata must withhold.
var sensitiveName = regexp.MustCompile(`(?i)TOKEN|SECRET|PASSWORD|PASSWD|CRED|KEY|AUTH|BEARER|PRIVATE|CERT`)

func metadataEnv(environ []string, prefix string) map[string]string {
	out := map[string]string{}
	for _, kv := range environ {
		name, value, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, prefix) && !sensitiveName.MatchString(name) {
			out[name] = value
		}
	}
	return out
}
