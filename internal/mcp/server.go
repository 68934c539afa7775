package mcp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	"github.com/paddock-dev/paddock/internal/version"
	"github.com/paddock-dev/paddock/sdk"
)

// sessionProtocolCutoff is the first MCP protocol version without sessions (SEP-2567). Sandboxes
// are scoped to a session and deleted when it ends, so the server speaks only the versions
// before it: on a sessionless protocol every request would end its own "session".
const sessionProtocolCutoff = "2026-07-28"

// cleanupTimeout bounds deleting a session's sandboxes after the session ended.
const cleanupTimeout = 30 * time.Second

// Config is what a Server is fixed to at start.
type Config struct {
	// Namespace holds every claim and pool the tools reach (required).
	Namespace string
	// Pools the tools may claim from and act on; empty means every pool of the namespace.
	Pools []string
	// KeepSandboxes leaves a session's sandboxes behind when the session ends.
	KeepSandboxes bool
	// MaxOutputBytes caps each of a command's stdout and stderr in a run_command result.
	MaxOutputBytes int
	// MaxReadBytes caps the bytes read_file returns.
	MaxReadBytes int
	// Logger receives the server's own log lines (never stdout: stdio carries the protocol).
	Logger *slog.Logger
	// ProtocolLogger receives the MCP library's log lines; nil means none.
	ProtocolLogger *slog.Logger
}

// Server serves Paddock's MCP tools and resources over any MCP transport. Every session gets an
// id; the sandboxes it claims carry it in MCPSessionLabel and are deleted when it ends.
type Server struct {
	cfg  Config
	kube client.WithWatch
	sdk  *sdk.Client
	mcp  *mcp.Server

	mu       sync.Mutex
	sessions map[*mcp.ServerSession]string
	cleanups sync.WaitGroup
}

// New returns a Server for cfg. kube reads claims, pools and Sandboxes; c claims and reaches them.
func New(cfg Config, kube client.WithWatch, c *sdk.Client) (*Server, error) {
	if cfg.Namespace == "" {
		return nil, errors.New("Config.Namespace is empty: name the namespace the tools may reach")
	}
	if cfg.MaxOutputBytes <= 0 || cfg.MaxReadBytes <= 0 {
		return nil, fmt.Errorf("Config.MaxOutputBytes=%d, MaxReadBytes=%d: both must be positive", cfg.MaxOutputBytes, cfg.MaxReadBytes)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{cfg: cfg, kube: kube, sdk: c, sessions: map[*mcp.ServerSession]string{}}
	var versions []string
	for _, v := range mcp.SupportedProtocolVersions() {
		if v < sessionProtocolCutoff { // dates compare as strings
			versions = append(versions, v)
		}
	}
	s.mcp = mcp.NewServer(&mcp.Implementation{Name: "paddock", Title: "Paddock agent sandboxes", Version: version.Get().GitVersion},
		&mcp.ServerOptions{
			Instructions:              instructions(cfg),
			Logger:                    cfg.ProtocolLogger,
			SupportedProtocolVersions: versions,
			Capabilities:              &mcp.ServerCapabilities{},
		})
	s.addLifecycleTools()
	s.addRuntimeTools()
	s.addCodeTools()
	s.addResources()
	return s, nil
}

// MCP is the protocol server, for mcp.Server.Run (stdio) or an HTTP handler.
func (s *Server) MCP() *mcp.Server { return s.mcp }

func instructions(cfg Config) string {
	pools := "any warm pool of the namespace (list_pools)"
	if len(cfg.Pools) > 0 {
		pools = fmt.Sprintf("the warm pools %v", cfg.Pools)
	}
	end := "are deleted when this session ends"
	if cfg.KeepSandboxes {
		end = "are kept when this session ends"
	}
	return fmt.Sprintf("Paddock gives you isolated Linux sandboxes on Kubernetes, in namespace %q, claimed from %s. "+
		"Claim one with claim_sandbox, then run commands (run_command) and move files (write_file, read_file, "+
		"list_files, stat_file) in it by its name. Paths are relative to the sandbox's working root. "+
		"In a sandbox whose pool runs the code interpreter, run_code runs Python, JavaScript or bash with state kept between calls and returns charts as images. "+
		"Sandboxes you claim %s; delete_sandbox frees one earlier.", cfg.Namespace, pools, end)
}

// sessionID returns the id of ss, registering it on first use: from then on the session's end
// deletes its sandboxes (unless KeepSandboxes).
func (s *Server) sessionID(ss *mcp.ServerSession) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if id, ok := s.sessions[ss]; ok {
		return id, nil
	}
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("making a session id: %w", err)
	}
	id := hex.EncodeToString(b)
	s.sessions[ss] = id
	s.cleanups.Add(1)
	go func() {
		defer s.cleanups.Done()
		_ = ss.Wait()
		s.endSession(ss, id)
	}()
	s.cfg.Logger.Info("MCP session started", "session", id, "transportSession", ss.ID())
	return id, nil
}

// knownSession is the id of ss if it has claimed anything, else "".
func (s *Server) knownSession(ss *mcp.ServerSession) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sessions[ss]
}

func (s *Server) endSession(ss *mcp.ServerSession, id string) {
	s.mu.Lock()
	delete(s.sessions, ss)
	s.mu.Unlock()
	log := s.cfg.Logger.With("session", id)
	if s.cfg.KeepSandboxes {
		log.Info("MCP session ended; keeping its sandboxes (--keep-sandboxes)")
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	deleted, err := s.deleteSession(ctx, id)
	if err != nil {
		log.Error("MCP session ended; deleting its sandboxes failed, delete them yourself", "selector", extensionsv1beta1.MCPSessionLabel+"="+id, "err", err)
		return
	}
	log.Info("MCP session ended; deleted its sandboxes", "claims", deleted)
}

// deleteSession deletes the claims labelled with session id and returns their names.
func (s *Server) deleteSession(ctx context.Context, id string) ([]string, error) {
	list := &extensionsv1beta1.SandboxClaimList{}
	if err := s.kube.List(ctx, list, client.InNamespace(s.cfg.Namespace), client.MatchingLabels{extensionsv1beta1.MCPSessionLabel: id}); err != nil {
		return nil, fmt.Errorf("listing the session's claims in namespace %q: %w", s.cfg.Namespace, err)
	}
	var names []string
	var errs []error
	for i := range list.Items {
		if err := s.kube.Delete(ctx, &list.Items[i]); client.IgnoreNotFound(err) != nil {
			errs = append(errs, fmt.Errorf("deleting claim %s: %w", list.Items[i].Name, err))
			continue
		}
		names = append(names, list.Items[i].Name)
	}
	return names, errors.Join(errs...)
}

// Shutdown ends every open session and waits, bounded by ctx, until the sessions' sandboxes are
// deleted. Call it after the transports stopped serving.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	open := slices.Collect(maps.Keys(s.sessions))
	s.mu.Unlock()
	for _, ss := range open {
		_ = ss.Close() // its Wait returns and endSession runs
	}
	done := make(chan struct{})
	go func() { s.cleanups.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("waiting for MCP sessions to delete their sandboxes: %w", ctx.Err())
	}
}

// poolAllowed reports whether the server may claim from and act on pool.
func (s *Server) poolAllowed(pool string) bool {
	return len(s.cfg.Pools) == 0 || slices.Contains(s.cfg.Pools, pool)
}
