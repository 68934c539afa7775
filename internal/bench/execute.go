package bench

import (
	"context"
	"fmt"
	"os"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/paddock-dev/paddock/internal/version"
)

// Execute is the whole harness as a command runs it: load the kubeconfig, record the conditions,
// run every scenario the options ask for and write the files into o.Out (or, with --from, read an
// earlier run's report), then rewrite --doc. paddock-bench and the `paddock bench` verb both
// call it.
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
	runner, conds, err := newRunner(ctx, o)
	if err != nil {
		return nil, err
	}
	report := &Report{Conditions: conds}
	return report, runner.runAll(ctx, o, report, o.Out)
}

// newRunner connects to the kubeconfig's cluster and records the conditions.
func newRunner(ctx context.Context, o *Options) (*Runner, Conditions, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = o.Kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, Conditions{}, fmt.Errorf("loading the kubeconfig (set --kubeconfig or KUBECONFIG): %w", err)
	}
	runner, err := NewRunner(cfg, o.Image)
	if err != nil {
		return nil, Conditions{}, err
	}
	if o.KWOK {
		runner.PlaceOnKWOK()
	}
	runner.MeasureController(o.Controller)
	runner.MeasureRuntime(o.Runtime)
	runner.MeasureE2B(o.E2B)
	conds, err := runner.Conditions(ctx)
	if err != nil {
		return nil, conds, err
	}
	conds.GitCommit, conds.Note, conds.Command = version.Get().GitCommit, o.Note, o.Command
	return runner, conds, nil
}

// runAll runs the options' scenarios in order into report, stopping at the first that fails. It
// writes the files into out after every scenario: what finished took long to measure and must
// survive a later failure or an interrupt.
func (r *Runner) runAll(ctx context.Context, o *Options, report *Report, out string) error {
	if _, err := WriteFiles(out, report); err != nil {
		return err
	}
	for _, s := range o.Scenarios() {
		var writeErr error
		_, err := r.RunThen(ctx, s, func(res Result) {
			report.Scenarios = append(report.Scenarios, res)
			_, writeErr = WriteFiles(out, report)
		})
		if err != nil {
			return fmt.Errorf("%s: %w", s.Name(), err)
		}
		if writeErr != nil {
			return writeErr
		}
	}
	return nil
}

func writeFile(path, content string) error {
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
