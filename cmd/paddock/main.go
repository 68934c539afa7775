// Command paddock is Paddock's command-line tool. Each command group lives in a file of its own
// (dev.go: the local cluster; internal/cli: the sandbox verbs, kept there so integration tests can
// run them in-process); main only assembles them.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/paddock-dev/paddock/internal/cli"
)

func main() {
	// The Kubernetes client libraries log through controller-runtime's logger; warnings and errors
	// reach stderr, the rest would only clutter a terminal.
	ctrl.SetLogger(logr.FromSlogHandler(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := newRootCommand().ExecuteContext(ctx); err != nil {
		// An *cli.ExitError carries a sandboxed command's exit code; its output is already printed.
		var exit *cli.ExitError
		if !errors.As(err, &exit) {
			fmt.Fprintln(os.Stderr, "paddock:", err)
		}
		stop()
		os.Exit(cli.ExitCode(err))
	}
}

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "paddock",
		Short:         "Paddock: agent sandboxes on Kubernetes",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newDevCommand())
	cli.AddCommands(root)
	return root
}
