package egressnode

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os/exec"
	"strings"
	"sync"
)

// IPTables applies Render's rules with iptables-restore and ip6tables-restore.
type IPTables struct {
	Ports Ports

	mu     sync.Mutex
	jumped bool
	last   string // the rules last applied, to skip a rewrite that changes nothing
}

// Sync polices exactly addrs: it rewrites the component's chains and makes sure the built-in
// chains jump to them.
func (t *IPTables) Sync(ctx context.Context, addrs []netip.Addr) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	v4, v6 := Render(addrs, t.Ports), Render6(addrs)
	if v4+v6 != t.last {
		if err := restore(ctx, "iptables-restore", v4); err != nil {
			return err
		}
		if err := restore(ctx, "ip6tables-restore", v6); err != nil && !errors.Is(err, exec.ErrNotFound) {
			return err
		}
		t.last = v4 + v6
	}
	if t.jumped {
		return nil
	}
	for _, tool := range []string{"iptables", "ip6tables"} {
		for _, j := range Jumps {
			if tool == "ip6tables" && j.Table == "nat" {
				continue
			}
			if err := ensureJump(ctx, tool, j); err != nil {
				if tool == "ip6tables" && errors.Is(err, exec.ErrNotFound) {
					continue
				}
				return err
			}
		}
	}
	t.jumped = true
	return nil
}

// Cleanup removes the jumps and the component's chains, for uninstalling; after it, policed
// Pods are no longer redirected.
func Cleanup(ctx context.Context) error {
	var errs []error
	for _, tool := range []string{"iptables", "ip6tables"} {
		if _, err := exec.LookPath(tool); err != nil {
			continue
		}
		for _, j := range Jumps {
			if tool == "ip6tables" && j.Table == "nat" {
				continue
			}
			for run(ctx, tool, "-w", "-t", j.Table, "-D", j.Chain, "-j", j.Target) == nil {
			}
			if err := run(ctx, tool, "-w", "-t", j.Table, "-F", j.Target); err != nil && !strings.Contains(err.Error(), "No chain") {
				errs = append(errs, err)
				continue
			}
			if err := run(ctx, tool, "-w", "-t", j.Table, "-X", j.Target); err != nil && !strings.Contains(err.Error(), "No chain") {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

func ensureJump(ctx context.Context, tool string, j Jump) error {
	if run(ctx, tool, "-w", "-t", j.Table, "-C", j.Chain, "-j", j.Target) == nil {
		return nil
	}
	return run(ctx, tool, "-w", "-t", j.Table, "-I", j.Chain, "1", "-j", j.Target)
}

func restore(ctx context.Context, tool, rules string) error {
	cmd := exec.CommandContext(ctx, tool, "-w", "--noflush")
	cmd.Stdin = strings.NewReader(rules)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %w: %s", tool, err, strings.TrimSpace(out.String()))
	}
	return nil
}

func run(ctx context.Context, tool string, args ...string) error {
	out, err := exec.CommandContext(ctx, tool, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", tool, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
