package cli

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/paddock-dev/paddock/api/sandboxd"
	"github.com/paddock-dev/paddock/sdk"
)

// runCodeFlags are run-code's own flags.
type runCodeFlags struct {
	language, context, images string
	timeout                   time.Duration
	port                      int
}

func newRunCodeCommand(g *Globals) *cobra.Command {
	f := &runCodeFlags{timeout: defaultTimeout}
	cmd := &cobra.Command{
		Use:               "run-code CLAIM [CODE]",
		ValidArgsFunction: completeClaims(g),
		Short:             "Run code in a claim's code interpreter, keeping state between calls",
		Long: "Run Python (default), JavaScript or bash in the sandbox's code interpreter (sandboxd's --interpreter-port, in pools of the\n" +
			"code-interpreter-v1 template), in a context that keeps its variables between calls. CODE, or stdin when CODE is absent or -,\n" +
			"is the code. What it prints goes to stdout and stderr, then the value of its last expression to stdout; an exception's\n" +
			"traceback goes to stderr and the exit code is 1. PNG images it displays (charts) are saved with --images.",
		Example: `  paddock run-code analyst 'x = 6 * 7'
  paddock run-code analyst 'x'                       # 42: the state is kept
  paddock run-code analyst --language bash 'ls -la'
  paddock run-code analyst --images charts < plot.py # charts/result-1.png, ...`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if f.port < 1 || f.port > 65535 {
				return fmt.Errorf("--interpreter-port %d: must be between 1 and 65535 (default %d)", f.port, sandboxd.InterpreterPort)
			}
			code, err := codeArg(args, cmd.InOrStdin())
			if err != nil {
				return err
			}
			g.InterpreterPort = f.port
			s, err := g.connect()
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), f.timeout)
			defer cancel()
			sb, err := s.attach(ctx, args[0])
			if err != nil {
				return err
			}
			defer sb.Close()
			in, err := sb.Interpreter()
			if err != nil {
				return err
			}
			ex, err := in.RunCode(ctx, code, sdk.RunCodeOptions{Language: f.language, Context: f.context, Timeout: f.timeout})
			if ex != nil {
				if perr := printExecution(ex, f.images, cmd.OutOrStdout(), cmd.ErrOrStderr()); perr != nil {
					return errors.Join(err, perr)
				}
			}
			switch {
			case err != nil:
				return err
			case ex.Error != nil:
				return &ExitError{Code: 1}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&f.language, "language", "", "python (default), javascript (js) or bash: runs in that language's default context")
	cmd.Flags().StringVar(&f.context, "context", "", "the ID of a context the interpreter made, instead of a language's default")
	cmd.Flags().StringVar(&f.images, "images", "", "directory to save the PNG images the code displays in (result-1.png, ...); created if missing")
	cmd.Flags().IntVar(&f.port, "interpreter-port", sandboxd.InterpreterPort, "the code interpreter's port on the pod (sandboxd's --interpreter-port)")
	cmd.Flags().DurationVar(&f.timeout, "timeout", defaultTimeout, "how long to wait for the claim and the code; past it the code is interrupted and its context keeps its state")
	g.addRouterFlags(cmd, "base URL of the sandbox-router (default: straight to the pod IP on the interpreter port)")
	return cmd
}

// codeArg is the code to run: the second argument, or stdin when it is absent or "-".
func codeArg(args []string, stdin io.Reader) (string, error) {
	code := ""
	if len(args) == 2 && args[1] != "-" {
		code = args[1]
	} else {
		b, err := io.ReadAll(stdin)
		if err != nil {
			return "", fmt.Errorf("reading the code from stdin: %w", err)
		}
		code = string(b)
	}
	if strings.TrimSpace(code) == "" {
		return "", errors.New("no code: pass it as the argument after the claim, or on stdin")
	}
	return code, nil
}

// printExecution writes what the code printed, then its values, to stdout and its error to
// stderr, and saves its PNG images in dir when dir is set.
func printExecution(ex *sdk.Execution, dir string, stdout, stderr io.Writer) error {
	fmt.Fprint(stdout, ex.Stdout)
	fmt.Fprint(stderr, ex.Stderr)
	images := 0
	for _, r := range ex.Results {
		if r.Text != "" {
			fmt.Fprintln(stdout, r.Text)
		}
		if r.PNG == "" || dir == "" {
			continue
		}
		data, err := base64.StdEncoding.DecodeString(r.PNG)
		if err != nil {
			return fmt.Errorf("the code interpreter sent a PNG that is not base64: %w", err)
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("--images %s: %w", dir, err)
		}
		images++
		p := filepath.Join(dir, fmt.Sprintf("result-%d.png", images))
		if err := os.WriteFile(p, data, 0o644); err != nil {
			return fmt.Errorf("--images %s: %w", dir, err)
		}
		fmt.Fprintf(stderr, "saved %s\n", p)
	}
	if ex.Error != nil {
		fmt.Fprintf(stderr, "%s\n", strings.TrimRight(ex.Error.Traceback, "\n"))
		if !strings.Contains(ex.Error.Traceback, ex.Error.Name) {
			fmt.Fprintf(stderr, "%s: %s\n", ex.Error.Name, ex.Error.Value)
		}
	}
	return nil
}
