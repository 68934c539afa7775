// Command sandboxd is the runtime daemon inside every sandbox: it runs commands with streaming
// output (gRPC process.v1.ProcessService, and its HTTP/1.1 form POST /v1/processes for clients
// behind the router), moves files (REST /v1/files), reports health and
// metadata, serves the legacy Python-runtime API on port 8888, and applies per-claim settings.
// Injected into an image that lacks it, it also supervises the container's own command.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"

	"github.com/paddock-dev/paddock/api/sandboxd"
	"github.com/paddock-dev/paddock/internal/sandboxd/preflight"
	"github.com/paddock-dev/paddock/internal/sandboxd/server"
	"github.com/paddock-dev/paddock/internal/sandboxd/supervise"
)

// version is set with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	os.Exit(run(os.Args[1:]))
}

// run returns the exit code: 2 for bad options, 1 for a runtime failure.
func run(args []string) int {
	fs := flag.NewFlagSet("sandboxd", flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprint(fs.Output(), usage); fs.PrintDefaults() }
	klog.InitFlags(fs)
	var opts Options
	opts.AddFlags(fs, os.LookupEnv)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	opts.Service = fs.Args()
	if opts.Version {
		fmt.Println("sandboxd", version)
		return 0
	}
	if opts.InstallTo != "" {
		if err := install(opts.InstallTo); err != nil {
			klog.ErrorS(err, "cannot install sandboxd", "to", opts.InstallTo)
			return 1
		}
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
	if code := runPreflight(opts); code != 0 {
		return code
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
	ctx, forward, stop := notify(len(opts.Service) > 0)
	defer stop()
	if err := serve(ctx, opts, forward); err != nil {
		klog.ErrorS(err, "sandboxd failed")
		return 1
	}
	return 0
}

const usage = `Usage: sandboxd [flags] [-- COMMAND [ARG...]]

sandboxd is the runtime daemon inside a Paddock sandbox.

With a COMMAND, sandboxd also runs it as a supervised service: the container's own program when
the controller injects sandboxd into an image that lacks it (docs/byo-image.md). The service
starts after sandboxd has bound its ports and put its tokens out of reach, with sandboxd's
environment minus every SANDBOXD_* variable, its working directory and stdio. It is restarted
when it exits (--service-restart, with a doubling backoff), gets SIGHUP, SIGUSR1, SIGUSR2,
SIGQUIT and SIGWINCH as sandboxd receives them, and SIGTERM when sandboxd stops (SIGKILL to its
process group after --shutdown-timeout); it dies with sandboxd.

Flags:
`

// forwarded are the signals a supervised service receives as sandboxd does; SIGTERM and SIGINT
// stop sandboxd and, through it, the service.
var forwarded = []os.Signal{syscall.SIGHUP, syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGQUIT, syscall.SIGWINCH}

// notify returns a context that ends at SIGTERM or SIGINT and, with a service, the channel of
// the signals to forward to it.
func notify(service bool) (context.Context, <-chan os.Signal, func()) {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	if !service {
		return ctx, nil, stop
	}
	forward := make(chan os.Signal, 8)
	signal.Notify(forward, forwarded...)
	return ctx, forward, func() { signal.Stop(forward); stop() }
}

// serve serves until ctx ends. With a service (opts.Service) it starts the service once the
// ports are bound, forwards the signals from forward to it, and stops it with the daemon.
func serve(ctx context.Context, opts Options, forward <-chan os.Signal) error {
	ls, err := listen(opts)
	if err != nil {
		return err
	}
	closeAll := func() {
		for _, l := range []net.Listener{ls.GRPC, ls.REST, ls.Legacy, ls.Envd, ls.Interpreter} {
			if l != nil {
				l.Close()
			}
		}
	}
	environ := childEnviron(os.Environ())
	d, err := server.New(opts.Config(environ))
	if err != nil {
		closeAll()
		return err
	}
	if len(opts.Service) == 0 {
		return d.Serve(ctx, ls)
	}
	svc, err := supervise.Start(opts.ServiceConfig(environ))
	if err != nil {
		closeAll()
		return err
	}
	// The service also stops when the daemon ends on its own (a listener failed).
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			select {
			case sig := <-forward:
				if err := svc.Signal(sig); err != nil {
					klog.ErrorS(err, "Forwarding a signal to the service", "signal", sig)
				}
			case <-ctx.Done():
				// The service stops alongside the daemon, within the same timeout.
				sctx, cancel := context.WithTimeout(context.Background(), opts.ShutdownTimeout)
				defer cancel()
				svc.Stop(sctx, syscall.SIGTERM)
				return
			}
		}
	}()
	err = d.Serve(ctx, ls)
	cancel()
	<-stopped
	return err
}

// specEnvironPath is the file through which a runtime may show the code sandboxd runs the
// container's start environment (tests point it at a fake).
var specEnvironPath = preflight.SpecEnvironPath

// runPreflight checks that the container can host sandboxd: always that the runtime does not
// show the tokens to the commands (unless opts.AllowTokenInRuntimeEnv), and everything else with
// --preflight. On failure it writes the causes and fixes to the termination message, where the
// Sandbox controller reads them, and returns the exit code.
func runPreflight(opts Options) int {
	var problems []preflight.Problem
	if p, exposed := preflight.RuntimeEnv(specEnvironPath); exposed {
		if !opts.AllowTokenInRuntimeEnv {
			problems = append(problems, p)
		} else {
			klog.InfoS("WARNING: serving although the code in this sandbox can read its tokens, as "+sandboxd.AllowTokenInRuntimeEnvEnv+" allows", "cause", p.Cause)
		}
	}
	if opts.Preflight {
		cfg, err := opts.PreflightConfig().Current()
		if err != nil {
			klog.ErrorS(err, "preflight")
			return 1
		}
		problems = append(problems, preflight.Check(context.Background(), cfg)...)
	}
	if len(problems) == 0 {
		klog.V(2).InfoS("Preflight passed")
		return 0
	}
	msg := preflight.Message(sandboxd.PreflightMessagePrefix, problems)
	klog.ErrorS(nil, "This container cannot host sandboxd", "problems", msg)
	if err := os.WriteFile(opts.TerminationMessagePath, []byte(msg), 0o644); err != nil {
		klog.ErrorS(err, "Writing the termination message", "path", opts.TerminationMessagePath)
	}
	return sandboxd.PreflightExitCode
}

// install copies the running executable to dst, read-only, through a temporary file renamed
// into place so a reader never sees half a binary.
func install(dst string) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("finding sandboxd's own executable: %w", err)
	}
	src, err := os.Open(self)
	if err != nil {
		return err
	}
	defer src.Close()
	tmp, err := os.CreateTemp(filepath.Dir(dst), ".sandboxd-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := io.Copy(tmp, src); err != nil {
		tmp.Close()
		return fmt.Errorf("copying %s to %s: %w", self, tmp.Name(), err)
	}
	if err := tmp.Chmod(0o555); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), dst); err != nil {
		return err
	}
	klog.InfoS("Installed sandboxd", "to", dst)
	return nil
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
	ls.Interpreter = bind(opts.InterpreterPort)
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
