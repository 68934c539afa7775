// Package version reports what binary is running. The build sets the variables with
// -ldflags "-X github.com/paddock-dev/paddock/internal/version.gitVersion=...".
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
)

var (
	gitVersion = "dev"
	gitCommit  = ""
	buildDate  = ""
)

// Info describes the running binary.
type Info struct {
	GitVersion string
	GitCommit  string
	BuildDate  string
	GoVersion  string
	Compiler   string
	Platform   string
}

// Get returns the build information, falling back to the VCS stamp Go embeds when the build set
// no commit.
func Get() Info {
	commit := gitCommit
	if commit == "" {
		if bi, ok := debug.ReadBuildInfo(); ok {
			for _, s := range bi.Settings {
				if s.Key == "vcs.revision" {
					commit = s.Value
				}
			}
		}
	}
	return Info{
		GitVersion: gitVersion,
		GitCommit:  commit,
		BuildDate:  buildDate,
		GoVersion:  runtime.Version(),
		Compiler:   runtime.Compiler,
		Platform:   runtime.GOOS + "/" + runtime.GOARCH,
	}
}

// String renders the information on one line for --version.
func (i Info) String() string {
	return fmt.Sprintf("%s (commit %s, built %s, %s %s)", i.GitVersion, i.GitCommit, i.BuildDate, i.GoVersion, i.Platform)
}

// NewCollector returns the agent_sandbox_build_info gauge: always 1, with the build as labels.
func NewCollector() prometheus.Collector {
	i := Get()
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "agent_sandbox_build_info",
		Help: "Build information of the running controller; the value is always 1.",
		ConstLabels: prometheus.Labels{
			"git_version": i.GitVersion, "git_commit": i.GitCommit, "build_date": i.BuildDate,
			"go_version": i.GoVersion, "compiler": i.Compiler, "platform": i.Platform,
		},
	})
	g.Set(1)
	return g
}
