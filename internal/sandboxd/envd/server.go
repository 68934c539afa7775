package envd

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"connectrpc.com/connect"

	"github.com/paddock-dev/paddock/api/proto/envd/filesystem/filesystempbconnect"
	"github.com/paddock-dev/paddock/api/proto/envd/process/processpbconnect"
	"github.com/paddock-dev/paddock/internal/sandboxd/pathsafe"
	"github.com/paddock-dev/paddock/internal/sandboxd/process"
)

// Version is the envd version sandboxd implements. The E2B SDKs switch features on the version
// the control plane reports (closeStdin from 0.5.2, octet-stream uploads from 0.5.7, file
// metadata from 0.6.2, watch entries from 0.6.3): 0.6.1 is the highest whose features are all
// served, because file metadata (X-Metadata-* headers) is not.
const Version = "0.6.1"

// DefaultHomeDir is the home directory E2B programs assume (user "user").
const DefaultHomeDir = "/home/user"

// maxMessageBytes bounds one Connect request message (a SendInput chunk, a path).
const maxMessageBytes = 8 << 20

// Config is what the envd server needs from sandboxd.
type Config struct {
	// Root is the sandbox root; every path is confined to it.
	Root *pathsafe.Root
	// Procs is sandboxd's process manager.
	Procs *process.Manager
	// Environ returns the environment of a new process with the request's variables applied:
	// sandboxd's own, then the claim's, then extra.
	Environ func(extra map[string]string) []string
	// AccessToken is the sandbox's access token: signed /files URLs are made with it, and without
	// Authorize every call but health must carry it (X-Access-Token); empty means no check.
	AccessToken string
	// Authorize decides a call from the tokens it presents (X-Access-Token, Authorization:
	// Bearer, AccessToken for a valid signed URL); it returns nil or an error whose GRPCStatus is
	// Unauthenticated (401) or PermissionDenied (403). sandboxd passes Daemon.AuthorizeCredentials.
	Authorize func(creds ...string) error
	// AwaitClaim, when set, is called with a call's tokens before Authorize: it may hold the call
	// (bounded, and never past ctx) while the sandbox is an unclaimed warm member about to be
	// claimed, so that the call is decided once the claim arrived instead of refused and retried.
	AwaitClaim func(ctx context.Context, creds []string)
	// HomeDir is the users' home directory as clients name it; it is the sandbox root.
	// DefaultHomeDir when empty.
	HomeDir string
	// MaxUploadBytes limits one uploaded file; 0 means no limit.
	MaxUploadBytes int64
	// Ready reports whether the daemon serves (false while it shuts down); nil means always.
	Ready func() bool
	// Now is the clock for signature expiry; time.Now when nil.
	Now func() time.Time
}

// Server serves envd's protocol.
type Server struct {
	cfg      Config
	paths    paths
	procs    *processTable
	watchers *watcherTable
}

// New returns a Server for cfg.
func New(cfg Config) *Server {
	if cfg.HomeDir == "" {
		cfg.HomeDir = DefaultHomeDir
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Authorize == nil {
		cfg.Authorize = tokenAuthorizer(cfg.AccessToken)
	}
	if cfg.Ready == nil {
		cfg.Ready = func() bool { return true }
	}
	return &Server{
		cfg:      cfg,
		paths:    paths{root: cfg.Root, home: cfg.HomeDir},
		procs:    &processTable{byPID: map[uint32]*tracked{}},
		watchers: &watcherTable{byID: map[string]*pollWatcher{}},
	}
}

// Handler serves the Connect services and the REST endpoints on one mux.
func (s *Server) Handler() http.Handler {
	opts := []connect.HandlerOption{connect.WithReadMaxBytes(maxMessageBytes)}
	mux := http.NewServeMux()
	mux.Handle(processpbconnect.NewProcessHandler(&processService{s: s}, opts...))
	mux.Handle(filesystempbconnect.NewFilesystemHandler(&filesystemService{s: s}, opts...))
	mux.HandleFunc("GET /health", s.health)
	mux.HandleFunc("GET /files", s.getFile)
	mux.HandleFunc("POST /files", s.postFiles)
	return s.authorize(mux)
}

// Close ends every polling watcher; WatchDir streams end with their requests.
func (s *Server) Close() {
	s.watchers.closeAll()
}

func (s *Server) health(w http.ResponseWriter, _ *http.Request) {
	if !s.cfg.Ready() {
		writeError(w, http.StatusServiceUnavailable, "sandboxd is shutting down")
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// keepalive returns a channel that ticks at the Keepalive-Ping-Interval (seconds) the client
// asked for, and its stop function; without the header it never ticks.
func keepalive(interval string) (<-chan time.Time, func()) {
	secs, _ := strconv.ParseUint(interval, 10, 32)
	if secs == 0 {
		return nil, func() {}
	}
	t := time.NewTicker(time.Duration(secs) * time.Second)
	return t.C, t.Stop
}

// lifetime is the context a process started by a request lives in: not the request's (E2B keeps
// a process when its client goes away) but bounded by the request's Connect-Timeout-Ms deadline.
func lifetime(req context.Context) (context.Context, context.CancelFunc) {
	if dl, ok := req.Deadline(); ok {
		return context.WithDeadline(context.Background(), dl)
	}
	return context.WithCancel(context.Background())
}
