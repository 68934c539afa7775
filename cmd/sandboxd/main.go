// Command sandboxd is the runtime daemon inside every sandbox: it runs commands with streaming
// output (gRPC process.v1.ProcessService, and its HTTP/1.1 form POST /v1/processes for clients
// behind the router), moves files (REST /v1/files), reports health and
// metadata, serves the legacy Python-runtime API on port 8888, and applies per-claim settings.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"

	"github.com/paddock-dev/paddock/api/sandboxd"
	"github.com/paddock-dev/paddock/internal/sandboxd/server"
)

// version is set with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	os.Exit(run(os.Args[1:]))
}

// run returns the exit code: 2 for bad options, 1 for a runtime failure.
func run(args []string) int {
	fs := flag.NewFlagSet("sandboxd", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: sandboxd [flags]\n\nsandboxd is the runtime daemon inside a Paddock sandbox.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	klog.InitFlags(fs)
	var opts Options
	opts.AddFlags(fs, os.LookupEnv)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if opts.Version {
		fmt.Println("sandboxd", version)
		return 0
	}
	if err := opts.Validate(); err != nil {
		fmt.Fprintf(os.Stderr, "sandboxd: invalid options:\n%v\n", err)
		return 2
	}
	if err := protectSecrets(); err != nil {
		klog.ErrorS(err, "cannot keep the tokens from the commands sandboxd runs")
		return 1
	}
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "token" {
			klog.InfoS("WARNING: --token on the command line is readable by every process of the sandbox in /proc/<pid>/cmdline; pass the token in env " + sandboxd.TokenEnv)
		}
	})
	// Serving without a token is warned about by the daemon itself when it starts serving.
	if opts.Token != "" && opts.AllowUnauthenticated {
		klog.InfoS("--allow-unauthenticated is ignored: a sandbox token is configured, so every call must carry it")
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := serve(ctx, opts); err != nil {
		klog.ErrorS(err, "sandboxd failed")
		return 1
	}
	return 0
}

func serve(ctx context.Context, opts Options) error {
	ls, err := listen(opts)
	if err != nil {
		return err
	}
	d, err := server.New(opts.Config(childEnviron(os.Environ())))
	if err != nil {
		for _, l := range []net.Listener{ls.GRPC, ls.REST, ls.Legacy, ls.Envd} {
			if l != nil {
				l.Close()
			}
		}
		return err
	}
	return d.Serve(ctx, ls)
}

// listen binds every port before anything is served, so a bind failure stops startup at once.
func listen(opts Options) (server.Listeners, error) {
	var ls server.Listeners
	var bound []net.Listener
	var err error
	bind := func(port int) net.Listener {
		if err != nil || port == 0 {
			return nil
		}
		var l net.Listener
		l, err = net.Listen("tcp", net.JoinHostPort(opts.ListenHost, strconv.Itoa(port)))
		if err == nil {
			bound = append(bound, l)
		}
		return l
	}
	ls.GRPC, ls.REST, ls.Legacy, ls.Envd = bind(opts.GRPCPort), bind(opts.RESTPort), bind(opts.LegacyPort), bind(opts.EnvdPort)
	if err != nil {
		for _, l := range bound {
			l.Close()
		}
		return server.Listeners{}, fmt.Errorf("binding listeners: %w", err)
	}
	return ls, nil
}

// protectSecrets keeps the tokens, already read into the options, from the commands sandboxd
// runs as its own user: it removes them from its environment and marks the process not dumpable,
// which makes /proc/<sandboxd>/environ, mem, fd, maps and ptrace root-only (the kernel still
// shows the environment sandboxd started with there, so removing it is not enough).
func protectSecrets() error {
	for _, name := range []string{sandboxd.TokenEnv, sandboxd.ControlTokenEnv} {
		if err := os.Unsetenv(name); err != nil {
			return fmt.Errorf("unsetting %s: %w", name, err)
		}
	}
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_DUMPABLE, 0): %w", err)
	}
	return nil
}

// childEnviron is the environment commands inherit: sandboxd's own without any SANDBOXD_*
// variable, so neither a token nor sandboxd's configuration (a token file's path) reaches them.
func childEnviron(environ []string) []string {
	out := make([]string, 0, len(environ))
	for _, kv := range environ {
		if !strings.HasPrefix(kv, sandboxd.SecretEnvPrefix) {
			out = append(out, kv)
		}
	}
	return out
}
