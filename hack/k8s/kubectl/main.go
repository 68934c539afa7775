// Command kubectl is the upstream command-line client, built from k8s.io/kubectl. The e2e tier
// runs it where upstream's clients do (the Python SDK spawns `kubectl port-forward`).
package main

import (
	"k8s.io/component-base/cli"
	"k8s.io/kubectl/pkg/cmd"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"
)

func main() {
	// kubectl prints its own errors and picks the exit code from them.
	if err := cli.RunNoErrOutput(cmd.NewDefaultKubectlCommand()); err != nil {
		cmdutil.CheckErr(err)
	}
}
