package devcluster

import (
	"errors"
	"fmt"
	"os/exec"
	"strings"
)

// NetworkPolicy on the real node is enforced by kube-router's network policy controller alone
// (--run-firewall; no routing, no service proxy, no CNI): iptables and ipsets on the host, which
// filter the bridge's traffic through br_netfilter, so runc and gVisor pods alike (gVisor's
// netstack still sends through the pod's veth).

// kubeRouterBinary is kube-router as hack/build-dev-tools.sh installs it (kube_router_version).
const kubeRouterBinary = "kube-router-v2.1.0"

// netpolArgs runs kube-router as a firewall only, with no port open: no health or metrics
// endpoint, which pods could otherwise reach on the node's addresses.
func netpolArgs(c Config) []string {
	return []string{
		"--kubeconfig=" + c.KubeconfigPath(),
		"--hostname-override=" + NodeName,
		"--run-firewall=true",
		"--run-router=false",
		"--run-service-proxy=false",
		"--run-loadbalancer=false",
		"--enable-cni=false",
		"--enable-ipv4=true",
		"--enable-ipv6=false",
		"--service-cluster-ip-range=" + c.ServiceCIDR.String(),
		"--health-port=0",
		"--metrics-port=0",
	}
}

// The chains and ipsets kube-router's network policy controller makes (kube-router v2.1.0).
var (
	netpolChainPrefixes = []string{"KUBE-ROUTER-", "KUBE-POD-FW-", "KUBE-NWPLCY-"}
	netpolSetPrefixes   = []string{"KUBE-SRC-", "KUBE-DST-"}
)

func netpolChain(name string) bool { return hasAnyPrefix(name, netpolChainPrefixes) }

func hasAnyPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// netpolReady fails until kube-router has hooked its chains into the filter table: from then on
// every pod's traffic passes its policy chains.
func netpolReady() error {
	out, err := exec.Command("iptables", "-w", "-t", "filter", "-S").Output()
	if err != nil {
		return fmt.Errorf("iptables -S: %w", err)
	}
	for _, hook := range []string{"INPUT", "FORWARD", "OUTPUT"} {
		if !hasJump(string(out), hook, "KUBE-ROUTER-"+hook) {
			return fmt.Errorf("kube-router has not hooked KUBE-ROUTER-%s into %s yet", hook, hook)
		}
	}
	return nil
}

func hasJump(rules, from, to string) bool {
	for _, line := range strings.Split(rules, "\n") {
		f := ruleFields(line)
		if len(f) > 2 && f[0] == "-A" && f[1] == from && jumpsTo(f, func(c string) bool { return c == to }) {
			return true
		}
	}
	return false
}

// removeNetpolRules deletes what kube-router left once it is stopped: its chains (with the
// jumps to them) and its ipsets. kube-router's own --cleanup-config does not clean its network
// policy rules in v2.1.0, so `down` does.
func removeNetpolRules() error {
	if _, err := exec.LookPath("iptables"); err != nil {
		return nil
	}
	errs := []error{removeChains("iptables", "filter", netpolChain)}
	if _, err := exec.LookPath("ipset"); err != nil {
		return errors.Join(errs...)
	}
	out, err := exec.Command("ipset", "list", "-n").Output()
	if err != nil {
		return errors.Join(append(errs, fmt.Errorf("ipset list -n: %w", err))...)
	}
	for _, name := range strings.Fields(string(out)) {
		if !hasAnyPrefix(name, netpolSetPrefixes) {
			continue
		}
		if b, err := exec.Command("ipset", "destroy", name).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("ipset destroy %s: %s", name, strings.TrimSpace(string(b))))
		}
	}
	return errors.Join(errs...)
}
