package cli

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	"github.com/paddock-dev/paddock/sdk"
)

// Globals are the flags every sandbox verb shares.
type Globals struct {
	Kubeconfig string
	Namespace  string
	Output     string
	// RouterURL and RuntimePort are exec's (and RouterURL cp's) flags, the SDK's Options.RouterURL and RuntimePort.
	RouterURL   string
	RuntimePort int
	// RESTPort is cp's --rest-port, the SDK's Options.RESTPort.
	RESTPort int
	// GRPCPort is exec's --grpc-port, the SDK's Options.GRPCPort.
	GRPCPort int
}

// ExitError ends the program with Code and no message: the command already said what happened
// (exec passes on the sandboxed command's exit code this way).
type ExitError struct{ Code int }

func (e *ExitError) Error() string { return fmt.Sprintf("exit status %d", e.Code) }

// ExitCode is the process exit code for err: an *ExitError's code, 1 for any other error.
func ExitCode(err error) int {
	var exit *ExitError
	if errors.As(err, &exit) {
		return exit.Code
	}
	if err != nil {
		return 1
	}
	return 0
}

// AddCommands registers the sandbox verbs and their global flags on root.
func AddCommands(root *cobra.Command) {
	g := &Globals{}
	fs := root.PersistentFlags()
	fs.StringVar(&g.Kubeconfig, "kubeconfig", "", "path to the kubeconfig file (default: $KUBECONFIG, then ~/.kube/config)")
	fs.StringVarP(&g.Namespace, "namespace", "n", "", "namespace of the claims and pools (default: the kubeconfig context's namespace)")
	fs.StringVarP(&g.Output, "output", "o", OutputTable, "output format of lists and objects: table, json or yaml")
	_ = root.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]cobra.Completion{OutputTable, OutputJSON, OutputYAML}, cobra.ShellCompDirectiveNoFileComp))
	root.AddCommand(newClaimCommand(g), newListCommand(g), newGetCommand(g), newExecCommand(g), newCopyCommand(g), newMCPCommand(g),
		newSuspendCommand(g), newResumeCommand(g), newDeleteCommand(g), newPoolCommand(g), newE2BCommand(g),
		newUninstallCommand(g))
}

// session is what a verb works with: the resolved namespace, a Kubernetes client and the SDK.
type session struct {
	namespace string
	kube      client.WithWatch
	sdk       *sdk.Client
}

func (g *Globals) connect() (*session, error) {
	if _, err := ParseOutput(g.Output); err != nil {
		return nil, err
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = g.Kubeconfig
	loader := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{})
	cfg, err := loader.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("loading the kubeconfig (--kubeconfig %q): %w", g.Kubeconfig, err)
	}
	ns := g.Namespace
	if ns == "" {
		if ns, _, err = loader.Namespace(); err != nil {
			return nil, fmt.Errorf("reading the namespace from the kubeconfig context: %w; pass -n NAMESPACE", err)
		}
	}
	return newSession(cfg, ns, sdk.Options{RouterURL: g.RouterURL, RuntimePort: g.RuntimePort, RESTPort: g.RESTPort, GRPCPort: g.GRPCPort})
}

func newSession(cfg *rest.Config, namespace string, opts sdk.Options) (*session, error) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, agentsv1beta1.AddToScheme, extensionsv1beta1.AddToScheme} {
		if err := add(scheme); err != nil {
			return nil, fmt.Errorf("building the API scheme: %w", err)
		}
	}
	kube, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("building a Kubernetes client: %w", err)
	}
	c, err := sdk.NewWithClient(kube, opts)
	if err != nil {
		return nil, err
	}
	return &session{namespace: namespace, kube: kube, sdk: c}, nil
}
