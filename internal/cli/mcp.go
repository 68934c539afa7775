package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/paddock-dev/paddock/internal/mcp"
)

// MCPTokenEnv holds the HTTP transport's bearer token when --token-file is not given.
const MCPTokenEnv = "PADDOCK_MCP_TOKEN"

// MCPOptions are `paddock mcp`'s flags.
type MCPOptions struct {
	Pools                []string
	KeepSandboxes        bool
	Listen               string
	TokenFile            string
	AllowUnauthenticated bool
	SessionIdleTimeout   time.Duration
	MaxOutputBytes       int
	MaxReadBytes         int
	GRPCPort, RESTPort   int
}

// AddFlags registers the options on fs.
func (o *MCPOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringSliceVar(&o.Pools, "pools", nil, "warm pools the tools may claim from and act on, comma-separated (default: every pool of the namespace)")
	fs.BoolVar(&o.KeepSandboxes, "keep-sandboxes", false, "keep a session's sandboxes when the session ends (default: delete them)")
	fs.StringVar(&o.Listen, "listen", "", "serve streamable HTTP at http://ADDRESS"+mcp.HTTPPath+" (e.g. 127.0.0.1:8090) instead of stdio; needs a bearer token")
	fs.StringVar(&o.TokenFile, "token-file", "", "file holding the bearer token HTTP clients must send (default: $"+MCPTokenEnv+")")
	fs.BoolVar(&o.AllowUnauthenticated, "allow-unauthenticated", false, "UNSAFE: serve HTTP without a token, so anyone who reaches the address runs code in your sandboxes (development only)")
	fs.DurationVar(&o.SessionIdleTimeout, "session-idle-timeout", 30*time.Minute, "end an HTTP session (and delete its sandboxes) after this long without a request")
	fs.IntVar(&o.MaxOutputBytes, "max-output-bytes", 64<<10, "run_command keeps this many bytes of each of stdout and stderr, then marks the rest as truncated")
	fs.IntVar(&o.MaxReadBytes, "max-read-bytes", 1<<20, "read_file returns at most this many bytes of a file")
	fs.IntVar(&o.GRPCPort, "grpc-port", 9090, "sandboxd's gRPC port on the pod (run_command)")
	fs.IntVar(&o.RESTPort, "rest-port", 8080, "sandboxd's REST file API port on the pod (file tools)")
}

// Validate checks the options and returns the HTTP bearer token (empty for stdio, or when
// unauthenticated HTTP was asked for).
func (o *MCPOptions) Validate(getenv func(string) string) (string, error) {
	switch {
	case o.MaxOutputBytes <= 0:
		return "", fmt.Errorf("--max-output-bytes %d: must be positive, e.g. --max-output-bytes 65536", o.MaxOutputBytes)
	case o.MaxReadBytes <= 0:
		return "", fmt.Errorf("--max-read-bytes %d: must be positive, e.g. --max-read-bytes 1048576", o.MaxReadBytes)
	case o.SessionIdleTimeout < 0:
		return "", fmt.Errorf("--session-idle-timeout %s: must not be negative (0 keeps idle sessions forever)", o.SessionIdleTimeout)
	}
	for _, p := range o.Pools {
		if p == "" {
			return "", fmt.Errorf("--pools %q: has an empty name; list pools as --pools a,b", strings.Join(o.Pools, ","))
		}
	}
	if o.Listen == "" {
		if o.TokenFile != "" || o.AllowUnauthenticated {
			return "", errors.New("--token-file and --allow-unauthenticated apply to --listen only; stdio needs no token")
		}
		return "", nil
	}
	token := strings.TrimSpace(getenv(MCPTokenEnv))
	if o.TokenFile != "" {
		var err error
		if token, err = readTokenFile("--token-file", o.TokenFile, "write a random token into it (e.g. openssl rand -hex 32)"); err != nil {
			return "", err
		}
	}
	switch {
	case token != "" && o.AllowUnauthenticated:
		return "", errors.New("--allow-unauthenticated and a token (--token-file or $" + MCPTokenEnv + ") are both set: pick one")
	case token == "" && !o.AllowUnauthenticated:
		return "", errors.New("--listen needs a bearer token: pass --token-file FILE or set $" + MCPTokenEnv +
			" (or, for development only, --allow-unauthenticated)")
	}
	return token, nil
}

func newMCPCommand(g *Globals) *cobra.Command {
	o := &MCPOptions{}
	cmd := &cobra.Command{
		Use:   "mcp",
		Short: "Serve Paddock sandboxes to an MCP client (an agent runtime) as tools, over stdio or HTTP",
		Long: `Serve the Model Context Protocol: tools to claim sandboxes from warm pools, run commands in
them and move files, fixed to one namespace (-n) and optionally a set of pools (--pools).
Sandboxes a session claims are deleted when the session ends, unless --keep-sandboxes.

Over stdio (the default) the MCP client starts this command; with --listen it serves
streamable HTTP at http://ADDRESS/mcp and requires a bearer token.`,
		Example: `  # stdio, for an MCP client's config ("command": "paddock", "args": [...])
  paddock mcp -n agents --pools python

  # streamable HTTP for remote agents, with a bearer token
  openssl rand -hex 32 > token && paddock mcp -n agents --listen 127.0.0.1:8090 --token-file token`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runMCP(cmd, g, o) },
	}
	o.AddFlags(cmd.Flags())
	_ = cmd.RegisterFlagCompletionFunc("pools", completePools(g)) // fails only for an unknown flag
	return cmd
}

func runMCP(cmd *cobra.Command, g *Globals, o *MCPOptions) error {
	token, err := o.Validate(os.Getenv)
	if err != nil {
		return err
	}
	g.GRPCPort, g.RESTPort = o.GRPCPort, o.RESTPort
	s, err := g.connect()
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelInfo}))
	// The protocol library logs every connection at Info; only its warnings matter to an operator.
	protocolLog := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	srv, err := mcp.New(mcp.Config{Namespace: s.namespace, Pools: o.Pools, KeepSandboxes: o.KeepSandboxes,
		MaxOutputBytes: o.MaxOutputBytes, MaxReadBytes: o.MaxReadBytes, Logger: log, ProtocolLogger: protocolLog}, s.kube, s.sdk)
	if err != nil {
		return err
	}
	ctx := cmd.Context()
	if o.Listen == "" {
		err = srv.MCP().Run(ctx, &mcpsdk.IOTransport{Reader: io.NopCloser(cmd.InOrStdin()), Writer: nopWriteCloser{cmd.OutOrStdout()}})
	} else {
		err = serveMCPHTTP(ctx, srv, o, token, log)
	}
	shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	return errors.Join(err, srv.Shutdown(shutdown))
}

func serveMCPHTTP(ctx context.Context, srv *mcp.Server, o *MCPOptions, token string, log *slog.Logger) error {
	l, err := net.Listen("tcp", o.Listen)
	if err != nil {
		return fmt.Errorf("--listen %q: %w", o.Listen, err)
	}
	if token == "" {
		log.Warn("SERVING MCP OVER HTTP WITHOUT AUTHENTICATION (--allow-unauthenticated): anyone who reaches this address can run code in your sandboxes", "address", l.Addr().String())
	}
	hs := &http.Server{Handler: srv.HTTPHandler(token, o.SessionIdleTimeout), ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(l) }()
	log.Info("serving MCP over streamable HTTP", "url", "http://"+l.Addr().String()+mcp.HTTPPath)
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	// Closing the server ends the HTTP sessions' streams; sessions end and clean up.
	shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := hs.Shutdown(shutdown); err != nil {
		return fmt.Errorf("stopping the HTTP server: %w", err)
	}
	return nil
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
