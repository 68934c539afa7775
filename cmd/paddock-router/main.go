// Command paddock-router is the one authenticated HTTP entry point to every sandbox: it routes
// by the X-Sandbox-* headers to the sandbox's pod and proxies the request, streams included.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	crlog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/paddock-dev/paddock/internal/router"
	"github.com/paddock-dev/paddock/internal/tracing"
	"github.com/paddock-dev/paddock/internal/version"
)

// Exit codes: a configuration error exits 2, a runtime failure 1.
const (
	exitRuntime = 1
	exitConfig  = 2
)

func main() {
	o, err := parse(os.Args[1:])
	if err != nil {
		fmt.Fprintf(os.Stderr, "paddock-router: %v\n", err)
		os.Exit(exitConfig)
	}
	if o.Version {
		printVersion()
		return
	}
	log := klog.Background().WithName("paddock-router")
	// The Sandbox informer logs through controller-runtime's global logger.
	crlog.SetLogger(log.WithName("cache"))
	cfg := o.Config()
	cfg.Log = log
	if o.NeedsKube() {
		if cfg.Kube, err = kubeConfig(o.Kubeconfig); err != nil {
			log.Error(err, "no API server connection; the Sandbox cache and TokenReview need one (set --kubeconfig or run in a pod)")
			os.Exit(exitConfig)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	flushTraces, err := setupTracing(ctx, o, &cfg)
	if err != nil {
		log.Error(err, "starting tracing")
		os.Exit(exitConfig)
	}
	defer flushTraces()
	r, err := router.New(cfg)
	if err != nil {
		log.Error(err, "invalid configuration")
		os.Exit(exitConfig)
	}
	if err := r.Listen(); err != nil {
		log.Error(err, "binding listeners")
		os.Exit(exitRuntime)
	}
	log.Info("serving", "proxy", o.HTTPAddr, "proxyTLS", o.HTTPSAddr, "authzMode", o.AuthzMode, "sandboxCache", o.SandboxCache, "tracing", o.EnableTracing)
	if err := r.Serve(ctx); err != nil {
		log.Error(err, "router stopped with an error")
		klog.Flush()
		os.Exit(exitRuntime)
	}
	klog.Flush()
}

// parse reads flags with the precedence command line > config file > environment > default.
func parse(args []string) (*Options, error) {
	o := defaultOptions()
	fs := flag.NewFlagSet("paddock-router", flag.ContinueOnError)
	o.AddFlags(fs)
	klog.InitFlags(fs)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q; every option is a flag", fs.Args())
	}
	path := o.ConfigFile
	if path == "" {
		path = os.Getenv("SANDBOX_ROUTER_CONFIG")
	}
	if path != "" {
		if err := applyConfigFile(fs, path); err != nil {
			return nil, err
		}
	}
	if o.Version {
		return o, nil
	}
	explicit := false
	fs.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == tracingFlag })
	if !explicit && tracing.EndpointConfigured() {
		o.EnableTracing = true
	}
	return o, o.Validate()
}

// setupTracing starts the OTLP exporter when tracing is on and gives the router its tracer. The
// returned function flushes the spans still buffered.
func setupTracing(ctx context.Context, o *Options, cfg *router.Config) (func(), error) {
	tp, shutdown, err := tracing.NewProvider(ctx, "paddock-router", o.EnableTracing)
	if err != nil {
		return nil, err
	}
	if o.EnableTracing {
		cfg.Tracer = tp.Tracer("paddock-router")
	}
	return func() {
		if err := shutdown(context.Background()); err != nil {
			cfg.Log.Error(err, "flushing traces")
		}
	}, nil
}

func kubeConfig(path string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = path
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
}

func printVersion() { fmt.Printf("paddock-router %s\n", version.Get()) }
