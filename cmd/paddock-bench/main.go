// Command paddock-bench measures any controller that serves the agent-sandbox API, through the
// API only: warm claims at fixed rates or in a burst, cold Sandboxes, and thousands of held
// Sandboxes across a controller restart; on a cluster's node also sandboxd and the router
// (--runtime) and E2B creates and first commands through the router's E2B front door (--e2b). It writes report.json, report.md and latency plots into
// --out and prints the Markdown; --compare runs everything for two controller images in turn. The `paddock bench` verb will
// wrap the same package.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"k8s.io/klog/v2"

	"github.com/paddock-dev/paddock/internal/bench"
)

func main() {
	o := bench.NewOptions()
	o.AddFlags(flag.CommandLine)
	klog.InitFlags(flag.CommandLine)
	flag.Parse()
	o.Command = commandLine(os.Args)
	if err := o.Validate(); err != nil {
		fmt.Fprintf(os.Stderr, "paddock-bench: %v\n", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// The first signal cancels the run and lets it clean up; a second one kills as usual.
	go func() {
		<-ctx.Done()
		stop()
	}()
	if o.Compare != "" {
		md, err := bench.ExecuteCompare(ctx, o)
		fmt.Print(md)
		if err != nil {
			fmt.Fprintf(os.Stderr, "paddock-bench: %v\n", err)
			os.Exit(1)
		}
		return
	}
	report, err := bench.Execute(ctx, o)
	if err != nil {
		fmt.Fprintf(os.Stderr, "paddock-bench: %v\n", err)
		os.Exit(1)
	}
	fmt.Print(bench.Markdown(report))
}

// commandLine quotes the arguments for a shell, so the report says how to repeat the run.
func commandLine(args []string) string {
	quoted := make([]string, len(args))
	for i, a := range args {
		if a == "" || strings.ContainsAny(a, " \t\n'\"\\$`*?[]{}()<>|&;#~") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		quoted[i] = a
	}
	return strings.Join(quoted, " ")
}
