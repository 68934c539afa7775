package server

import (
	"context"
	"os/exec"
	"time"

	"k8s.io/klog/v2"
)

// DefaultWarmCommand is what an E2B client's first commands.run starts (/bin/bash -l -c <cmd>);
// a locked warm member with the envd port runs it once with `true`, before its claim.
var DefaultWarmCommand = []string{"/bin/bash", "-l", "-c", "true"}

// warmTimeout bounds the warm-up command.
const warmTimeout = 30 * time.Second

// warmExec runs Config.WarmCommand once, output discarded, as a command of the sandbox would run
// (its environment, the sandbox root). Under gVisor the first exec of a binary in a new sandbox
// reads it and its libraries through the Sentry; doing that before the claim takes it off the
// claim's first command. A command that cannot run is only logged: it costs the first command
// what it cost before.
func (d *Daemon) warmExec(ctx context.Context) {
	defer close(d.warmed)
	ctx, cancel := context.WithTimeout(ctx, warmTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, d.cfg.WarmCommand[0], d.cfg.WarmCommand[1:]...)
	cmd.Env, cmd.Dir = d.cfg.Environ, d.root.Dir()
	start := time.Now()
	if err := cmd.Run(); err != nil {
		klog.V(2).InfoS("warm-up command failed; the first command will pay for its first exec", "command", d.cfg.WarmCommand, "err", err.Error())
		return
	}
	klog.V(2).InfoS("warm-up command ran", "command", d.cfg.WarmCommand, "took", time.Since(start))
}
