package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/paddock-dev/paddock/sdk"
)

// execFlags are exec's own flags.
type execFlags struct {
	timeout    time.Duration
	stdin, tty bool
	grpcPort   int
}

func newExecCommand(g *Globals) *cobra.Command {
	f := &execFlags{timeout: defaultTimeout}
	cmd := &cobra.Command{
		Use:               "exec CLAIM [-i] [-t] -- COMMAND [ARG...]",
		ValidArgsFunction: completeClaims(g),
		Short:             "Run a command in a claim's sandbox and exit with its exit code",
		Example: `  paddock exec my-agent -- python3 -c 'print(6*7)'

  # Pipes and redirections need a shell inside the sandbox
  paddock exec my-agent -- sh -c 'ls / | wc -l'

  # Through the sandbox-router instead of straight to the pod IP
  kubectl create token agent-runner > token   # an identity allowed sandboxes/proxy
  paddock exec my-agent --router-url http://sandbox-router-svc:8080 --router-token-file token -- uname -a

  # Feed stdin to the command, or open an interactive shell on a terminal
  gzip -c data.csv | paddock exec -i my-agent -- sh -c 'gunzip > data.csv'
  paddock exec -it my-agent -- sh`,
		Args: func(cmd *cobra.Command, args []string) error {
			_, _, err := SplitExecArgs(args, cmd.ArgsLenAtDash())
			return err
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			claim, command, _ := SplitExecArgs(args, cmd.ArgsLenAtDash())
			if err := f.validate(g); err != nil {
				return err
			}
			s, err := g.connect()
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), f.timeout)
			defer cancel()
			sb, err := s.attach(ctx, claim)
			if err != nil {
				return err
			}
			defer sb.Close()
			rt, err := sb.Runtime()
			if err != nil {
				return err
			}
			if f.stdin || f.tty {
				var in io.Reader
				if f.stdin {
					in = cmd.InOrStdin()
				}
				return RunInteractive(ctx, rt, command, f.tty, in, cmd.OutOrStdout(), cmd.ErrOrStderr())
			}
			return RunExec(ctx, rt, command, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	cmd.Flags().BoolVarP(&f.stdin, "stdin", "i", false, "pass stdin to the command (streams over sandboxd's gRPC port)")
	cmd.Flags().BoolVarP(&f.tty, "tty", "t", false, "run the command on a terminal; with -i, for interactive programs such as a shell")
	g.addRouterFlags(cmd, "base URL of the sandbox-router (default: straight to the pod IP on port 8888)")
	cmd.Flags().IntVar(&g.RuntimePort, "runtime-port", 8888, "the runtime's port on the pod: the legacy runtime API that sandboxd and the Python runtime serve")
	cmd.Flags().IntVar(&f.grpcPort, "grpc-port", 9090, "sandboxd's gRPC port on the pod, used by -i and -t")
	cmd.Flags().DurationVar(&f.timeout, "timeout", defaultTimeout, "how long to wait for the claim and the command")
	return cmd
}

func (f *execFlags) validate(g *Globals) error {
	switch {
	case g.RuntimePort < 1 || g.RuntimePort > 65535:
		return fmt.Errorf("--runtime-port %d: must be between 1 and 65535 (default 8888)", g.RuntimePort)
	case f.grpcPort < 1 || f.grpcPort > 65535:
		return fmt.Errorf("--grpc-port %d: must be between 1 and 65535 (default 9090)", f.grpcPort)
	case (f.stdin || f.tty) && g.RouterURL != "":
		return errors.New("-i and -t stream over sandboxd's gRPC port straight to the pod; the router cannot carry them: drop --router-url")
	}
	g.GRPCPort = f.grpcPort
	return nil
}

// RunInteractive runs command with streamed input and output through sandboxd's gRPC
// ProcessService, on a pseudo-terminal when tty, and returns an *ExitError with its exit code
// when it did not exit 0. When tty and stdin is this process's terminal, the terminal is put in
// raw mode for the command's lifetime and window size changes are passed on.
func RunInteractive(ctx context.Context, rt *sdk.Runtime, command []string, tty bool, stdin io.Reader, stdout, stderr io.Writer) error {
	o := sdk.ExecOptions{Argv: command, Stdin: stdin, Stdout: stdout, Stderr: stderr}
	if tty {
		term, restore, err := localTerminal(stdin, stdout)
		if err != nil {
			return err
		}
		defer restore()
		o.TTY, o.Resize = term.size, term.resize
	}
	code, err := rt.Exec(ctx, o)
	if err != nil {
		return err
	}
	if code != 0 {
		return &ExitError{Code: code}
	}
	return nil
}

// SplitExecArgs splits `exec CLAIM -- COMMAND...` into the claim and the command words; dash is
// cobra's ArgsLenAtDash (-1 when there was no "--").
func SplitExecArgs(args []string, dash int) (string, []string, error) {
	switch {
	case dash < 0 && len(args) > 1:
		return "", nil, errors.New(`separate the command with "--": paddock exec CLAIM -- COMMAND [ARG...]`)
	case dash == 0 || len(args) == 0:
		return "", nil, errors.New("CLAIM is missing: paddock exec CLAIM -- COMMAND [ARG...]")
	case dash > 1:
		return "", nil, fmt.Errorf("exec takes one CLAIM before \"--\", got %d: %q", dash, args[:dash])
	case len(args) < 2:
		return "", nil, errors.New(`COMMAND is missing after "--": paddock exec CLAIM -- COMMAND [ARG...]`)
	}
	return args[0], args[1:], nil
}

// RunExec runs command through the runtime, copies its output and returns an *ExitError with its
// exit code when it did not exit 0.
func RunExec(ctx context.Context, rt *sdk.Runtime, command []string, stdout, stderr io.Writer) error {
	res, err := rt.Run(ctx, JoinCommand(command))
	if err != nil {
		return err
	}
	if _, err := io.WriteString(stdout, res.Stdout); err != nil {
		return err
	}
	if _, err := io.WriteString(stderr, res.Stderr); err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return &ExitError{Code: res.ExitCode}
	}
	return nil
}

// JoinCommand quotes the words for the runtime, which splits its command string like a POSIX
// shell: each word comes back out exactly as given.
func JoinCommand(words []string) string {
	quoted := make([]string, len(words))
	for i, w := range words {
		if w != "" && strings.Trim(w, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,+@%") == "" {
			quoted[i] = w
			continue
		}
		quoted[i] = "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
	}
	return strings.Join(quoted, " ")
}
