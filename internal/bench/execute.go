package bench

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/paddock-dev/paddock/internal/version"
)

// Execute is the whole harness as a command runs it: load the kubeconfig, record the conditions,
// run every scenario the options ask for and write the files into o.Out. paddock-bench and the
// `paddock bench` verb both call it.
func Execute(ctx context.Context, o *Options) (*Report, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	report, err := run(ctx, o)
	if err != nil {
		return report, err
	}
	if o.Doc != "" {
		if err := UpdateDoc(o.Doc, report); err != nil {
			return report, err
		}
	}
	return report, nil
}

// run runs the scenarios and writes the files, or, with --from, reads an earlier run's report.
func run(ctx context.Context, o *Options) (*Report, error) {
	if o.From != "" {
		return ReadReport(o.From)
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = o.Kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("loading the kubeconfig (set --kubeconfig or KUBECONFIG): %w", err)
	}
	runner, err := NewRunner(cfg, o.Image)
	if err != nil {
		return nil, err
	}
	if o.KWOK {
		runner.PlaceOnKWOK()
	}
	runner.MeasureController(o.Controller)
	conds, err := runner.Conditions(ctx)
	if err != nil {
		return nil, err
	}
	conds.GitCommit, conds.Note, conds.Command = version.Get().GitCommit, o.Note, o.Command
	report := &Report{Conditions: conds}
	var runErr error
	for _, s := range o.Scenarios() {
		res, err := runner.Run(ctx, s)
		if err != nil {
			runErr = fmt.Errorf("%s: %w", s.Name(), err)
			break
		}
		report.Scenarios = append(report.Scenarios, res)
	}
	// What finished is written even when a later scenario failed: it took long to measure.
	if _, err := WriteFiles(o.Out, report); err != nil {
		return report, errors.Join(runErr, err)
	}
	return report, runErr
}
