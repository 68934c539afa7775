package bench

import (
	"context"
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
	conds, err := runner.Conditions(ctx)
	if err != nil {
		return nil, err
	}
	conds.GitCommit, conds.Note = version.Get().GitCommit, o.Note
	report := &Report{Conditions: conds}
	for _, s := range o.Scenarios() {
		res, err := runner.Run(ctx, s)
		if err != nil {
			return report, fmt.Errorf("%s: %w", s.Name(), err)
		}
		report.Scenarios = append(report.Scenarios, res)
	}
	if _, err := WriteFiles(o.Out, report); err != nil {
		return report, err
	}
	return report, nil
}
