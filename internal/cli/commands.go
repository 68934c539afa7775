package cli

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"

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
	// RouterTokenFile is --router-token-file: the bearer token sent to the router.
	RouterTokenFile string
	// RESTPort is cp's --rest-port, the SDK's Options.RESTPort.
	RESTPort int
	// GRPCPort is exec's --grpc-port, the SDK's Options.GRPCPort.
	GRPCPort int
	// InterpreterPort is run-code's --interpreter-port, the SDK's Options.InterpreterPort.
	InterpreterPort int
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
	root.AddCommand(newClaimCommand(g), newListCommand(g), newGetCommand(g), newExecCommand(g), newRunCodeCommand(g), newCopyCommand(g), newMCPCommand(g),
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
	opts := sdk.Options{RouterURL: g.RouterURL, RuntimePort: g.RuntimePort, RESTPort: g.RESTPort, GRPCPort: g.GRPCPort,
		InterpreterPort: g.InterpreterPort}
	if opts.Token, err = g.routerToken(cfg, os.Getenv); err != nil {
		return nil, err
	}
	return newSession(cfg, ns, opts)
}

// RouterTokenEnv holds the bearer token for the router when --router-token-file is not given.
const RouterTokenEnv = "PADDOCK_ROUTER_TOKEN"

// addRouterFlags registers --router-url and --router-token-file on a verb that can reach
// sandboxes through the router, and makes the verb's refusals by the router say what to do.
func (g *Globals) addRouterFlags(cmd *cobra.Command, urlHelp string) {
	cmd.Flags().StringVar(&g.RouterURL, "router-url", "", urlHelp)
	cmd.Flags().StringVar(&g.RouterTokenFile, "router-token-file", "", "file holding the bearer token sent to the router with --router-url (default: $"+RouterTokenEnv+
		", then the kubeconfig user's token). The router's default --authz-mode=tokenreview wants a Kubernetes token whose identity may create sandboxes/proxy on the sandbox")
	run := cmd.RunE
	cmd.RunE = func(cmd *cobra.Command, args []string) error { return g.withRouterHint(run(cmd, args)) }
}

// withRouterHint adds to a 401 or 403 of the router (its JSON error, not sandboxd's) which
// credential to send instead.
func (g *Globals) withRouterHint(err error) error {
	var h *sdk.HTTPError
	if g.RouterURL == "" || !errors.As(err, &h) || h.Code != "" {
		return err
	}
	switch h.StatusCode {
	case http.StatusUnauthorized:
		return fmt.Errorf("%w; the router wants a Kubernetes bearer token: give --router-token-file or $%s (e.g. from kubectl create token NAME)", err, RouterTokenEnv)
	case http.StatusForbidden:
		return fmt.Errorf("%w; grant the token's identity create on sandboxes/proxy for this sandbox (docs/security.md, \"Who may send a request\")", err)
	}
	return err
}

// routerToken is the credential the CLI sends to the router: --router-token-file, else
// $PADDOCK_ROUTER_TOKEN, else the kubeconfig user's bearer token. "" when there is none (a router
// with --authz-mode=allow-all needs none; one that wants a token answers 401, which the CLI
// reports with these flags) or when the CLI goes straight to the pod, which needs the
// sandbox's own token instead.
func (g *Globals) routerToken(cfg *rest.Config, getenv func(string) string) (string, error) {
	if g.RouterURL == "" {
		if g.RouterTokenFile != "" {
			return "", errors.New("--router-token-file is the router's credential: give --router-url too, or drop it")
		}
		return "", nil
	}
	if g.RouterTokenFile != "" {
		return readTokenFile("--router-token-file", g.RouterTokenFile, "write the bearer token into it, e.g. kubectl create token NAME > FILE")
	}
	if tok := strings.TrimSpace(getenv(RouterTokenEnv)); tok != "" {
		return tok, nil
	}
	if cfg.BearerToken != "" {
		return cfg.BearerToken, nil
	}
	if cfg.BearerTokenFile != "" {
		b, err := os.ReadFile(cfg.BearerTokenFile)
		if err != nil {
			return "", fmt.Errorf("reading the kubeconfig's token file for the router: %w; or give --router-token-file", err)
		}
		return strings.TrimSpace(string(b)), nil
	}
	return "", nil
}

// readTokenFile reads a bearer token from the file a flag names, without surrounding whitespace;
// an unreadable or empty file is an error naming the flag, with fill saying how to fill it.
func readTokenFile(flag, path, fill string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("%s %q: %w", flag, path, err)
	}
	if tok := strings.TrimSpace(string(b)); tok != "" {
		return tok, nil
	}
	return "", fmt.Errorf("%s %q is empty: %s", flag, path, fill)
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
