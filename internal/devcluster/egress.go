package devcluster

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/paddock-dev/paddock/internal/egressnode"
	"github.com/paddock-dev/paddock/internal/procstat"
	"github.com/paddock-dev/paddock/internal/standin"
)

// Sandboxes' egress policies (annotation paddock.dev/egress, docs/design/egress.md) are
// enforced on the real node by paddock-egress, built from this source tree and run on the host
// like kube-router: the node is the host, whose iptables it rewrites. (The bundles run it as a
// DaemonSet, dist/paddock-egress.yaml; an image with iptables cannot be built here without
// Docker or a Debian root filesystem of its own.) It starts once Paddock is installed: its CA
// Secret lives in paddock-system.

// The ports paddock-egress listens on, on every address of the node (cmd/paddock-egress's
// defaults): policed Pods' TCP and DNS are redirected there.
const (
	egressProxyPort = 15001
	egressDNSPort   = 15053
)

// EgressCASecret is the installation's egress CA (tls.crt, tls.key), namespace/name.
const EgressCASecret = "paddock-system/paddock-egress-ca"

// egressArgs polices the real node's Pods: the cluster's own ranges are always denied, names
// resolve through the internet stand-in.
func egressArgs(c Config) []string {
	cidrs := []string{c.PodCIDR.String(), c.ServiceCIDR.String(), c.KWOKCIDR.String(), c.NodeIP.String() + "/32"}
	return []string{
		"--kubeconfig=" + c.KubeconfigPath(),
		"--node-name=" + NodeName,
		"--cluster-cidrs=" + strings.Join(cidrs, ","),
		"--upstream-dns=" + net.JoinHostPort(c.InternetResolver().String(), "53"),
		"--ca-secret=" + EgressCASecret,
		"--proxy-port=" + strconv.Itoa(egressProxyPort),
		"--dns-port=" + strconv.Itoa(egressDNSPort),
	}
}

// egressEnv makes the proxy verify the hosts it opens TLS to against the internet stand-in's
// CA: the stand-in is the dev cluster's whole internet.
func egressEnv(c Config) []string {
	return []string{"SSL_CERT_FILE=" + standin.CACertPath(c.InternetDir())}
}

// egressReady fails until the proxy accepts connections on the node address.
func egressReady(ctx context.Context, c Config) error {
	d := net.Dialer{Timeout: 2 * time.Second}
	conn, err := d.DialContext(ctx, "tcp", hostPort(c.NodeIP, egressProxyPort))
	if err != nil {
		return fmt.Errorf("the egress proxy does not accept connections yet: %w", err)
	}
	return conn.Close()
}

// removeEgressRules deletes paddock-egress's chains once it is stopped; they stay while it is
// down on purpose (policed Pods fail closed), so only `down` removes them.
func removeEgressRules() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return egressnode.Cleanup(ctx)
}

// ensureEgress builds paddock-egress from the source tree and starts it unless it runs.
func (cl *cluster) ensureEgress(ctx context.Context) (string, bool, error) {
	if err := goBuild(ctx, cl.cfg.SourceDir, "./cmd/paddock-egress", cl.cfg.path("bin", "paddock-egress")); err != nil {
		return "", false, err
	}
	return cl.ensure(ctx, cl.components()[compEgress])
}

// EgressPID is the pid of the cluster's running paddock-egress, 0 when none runs.
func EgressPID(cfg Config) int { return cfg.process(compEgress).pid() }

// KillEgress kills the cluster's paddock-egress with SIGKILL, as a crash would (no cleanup
// runs; its chains stay, so policed Pods have no egress), and returns once the process is gone.
// It returns the pid it killed; none running is an error.
func KillEgress(ctx context.Context, cfg Config) (int, error) {
	p := cfg.process(compEgress)
	pid := p.pid()
	if pid == 0 {
		return 0, fmt.Errorf("paddock-egress of %s is not running (no live pid in %s)", cfg.StateDir, p.pidFile)
	}
	if err := syscall.Kill(-pid, syscall.SIGKILL); err != nil {
		return 0, fmt.Errorf("killing paddock-egress (pid %d): %w", pid, err)
	}
	if !waitGone(ctx, pid, 10*time.Second) {
		return 0, fmt.Errorf("paddock-egress (pid %d) survived SIGKILL", pid)
	}
	return pid, nil
}

// StartEgress starts the cluster's paddock-egress again with the binary and arguments `up`
// gave it, unless it runs, and waits until its proxy accepts connections. It returns its pid.
func StartEgress(ctx context.Context, cfg Config) (int, error) {
	if err := cfg.Validate(); err != nil {
		return 0, err
	}
	cl := &cluster{cfg: cfg}
	comp := cl.components()[compEgress]
	if !exists(comp.binary) {
		return 0, fmt.Errorf("%s does not exist; run paddock dev up first", comp.binary)
	}
	if _, _, err := cl.ensure(ctx, comp); err != nil {
		return 0, err
	}
	return cfg.process(compEgress).pid(), nil
}

// EgressCPU is the CPU time (user and system) the running paddock-egress has used so far, for
// measuring its cost per request: read it before and after a load.
func EgressCPU(cfg Config) (time.Duration, error) {
	pid := cfg.process(compEgress).pid()
	if pid == 0 {
		return 0, fmt.Errorf("paddock-egress of %s is not running", cfg.StateDir)
	}
	st, err := procstat.Read("/proc", pid)
	if err != nil {
		return 0, err
	}
	return st.CPU(), nil
}
