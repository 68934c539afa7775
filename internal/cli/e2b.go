package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/paddock-dev/paddock/api/e2b"
	"github.com/paddock-dev/paddock/internal/e2baccess"
)

func newE2BCommand(g *Globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "e2b",
		Short: "Manage access to the E2B-compatible front door of paddock-router",
	}
	cmd.AddCommand(newE2BCreateKeyCommand(g))
	return cmd
}

func newE2BCreateKeyCommand(g *Globals) *cobra.Command {
	keysNamespace, routerNamespace, apiURL := e2b.DefaultAPIKeyNamespace, "paddock-system", ""
	port := e2b.DefaultPort
	cmd := &cobra.Command{
		Use:   "create-key",
		Short: "Create an E2B API key bound to one namespace and print E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY",
		Long: `Create an E2B API key bound to the namespace of -n: programs using it create, see and kill
sandboxes (SandboxClaims) of that namespace only. The key is a Secret in --keys-namespace that
paddock-router watches, so it works at once; delete the Secret to revoke it.`,
		Example: `  eval "$(paddock e2b create-key -n agents)"
  paddock e2b create-key -n agents --api-url https://e2b.example.com`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := g.connect()
			if err != nil {
				return err
			}
			url := apiURL
			if url == "" {
				if url, err = e2baccess.RouterURL(cmd.Context(), s.kube, routerNamespace, port); err != nil {
					return err
				}
			}
			key, secret, err := e2baccess.CreateAPIKey(cmd.Context(), s.kube, keysNamespace, s.namespace)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "# API key for namespace %s stored in Secret %s/%s\n", s.namespace, secret.Namespace, secret.Name)
			fmt.Fprint(cmd.OutOrStdout(), e2baccess.Exports(url, key))
			return nil
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&keysNamespace, "keys-namespace", keysNamespace, "namespace of the API-key Secrets (the router's --e2b-api-key-namespace)")
	fs.StringVar(&routerNamespace, "router-namespace", routerNamespace, "namespace of paddock-router, to find its address")
	fs.StringVar(&apiURL, "api-url", apiURL, "the front door's URL to print (default: http://<a Ready router Pod's IP>:<--port>)")
	fs.IntVar(&port, "port", port, "port of the router's E2B listener")
	return cmd
}
