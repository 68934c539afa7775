// Command paddock-bench measures any controller that serves the agent-sandbox API, through the
// API only: warm claims at fixed rates or in a burst, and cold Sandboxes. It writes report.json,
// report.md and latency plots into --out. The `paddock bench` verb will wrap the same package.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/paddock-dev/paddock/internal/bench"
	"github.com/paddock-dev/paddock/internal/version"
)

func main() {
	o := bench.NewOptions()
	o.AddFlags(flag.CommandLine)
	klog.InitFlags(flag.CommandLine)
	flag.Parse()
	if err := o.Validate(); err != nil {
		fmt.Fprintf(os.Stderr, "paddock-bench: %v\n", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintf(os.Stderr, "paddock-bench: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o *bench.Options) error {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = o.Kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return fmt.Errorf("loading the kubeconfig (set --kubeconfig or KUBECONFIG): %w", err)
	}
	runner, err := bench.NewRunner(cfg, o.Image)
	if err != nil {
		return err
	}
	conds, err := runner.Conditions(ctx)
	if err != nil {
		return err
	}
	conds.GitCommit, conds.Note = version.Get().GitCommit, o.Note
	report := &bench.Report{Conditions: conds}
	for _, s := range o.Scenarios() {
		res, err := runner.Run(ctx, s)
		if err != nil {
			return fmt.Errorf("%s: %w", s.Name(), err)
		}
		report.Scenarios = append(report.Scenarios, res)
	}
	if _, err := bench.WriteFiles(o.Out, report); err != nil {
		return err
	}
	fmt.Print(bench.Markdown(report))
	return nil
}
