package devcluster

import (
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"

	"github.com/paddock-dev/paddock/internal/standin"
)

// The egress guard keeps every packet of the pods and of the internet stand-in on this machine.
// The bridge plugin turns IP forwarding on, and pod traffic is not masqueraded, so without it a
// pod's packet to any public address would leave through the host's default route. Policy
// routing does it, not iptables: traffic that arrives from the pod bridge or the stand-in's link
// may be routed to the pod range and the stand-in range only; anything else is unreachable
// (the sender gets an ICMP error at once). Addresses of the host itself are matched first by the
// kernel's local table, so the node address still serves, under NetworkPolicy. A NetworkPolicy
// controller cannot reorder these rules, as it could iptables chains.

// guardPriority is the first of the guard's rule priorities: below main's 32766, above local's 0.
const guardPriority = 19818

// guardRules renders the guard's `ip rule` arguments (without the add or del verb).
func guardRules(c Config) [][]string {
	prio := func(n int) []string { return []string{"priority", strconv.Itoa(guardPriority + n)} }
	var rules [][]string
	for _, iif := range []string{bridgeInterface, standin.HostInterface} {
		for _, to := range []string{c.PodCIDR.String(), c.InternetCIDR.String()} {
			rules = append(rules, append(prio(0), "iif", iif, "to", to, "lookup", "main"))
		}
		rules = append(rules, append(prio(1), "iif", iif, "unreachable"))
	}
	return rules
}

// ensureGuard installs the guard's rules, replacing any it finds (ip rule add does not refuse a
// duplicate, so a second `up` deletes first).
func ensureGuard(c Config) error {
	if err := removeGuard(); err != nil {
		return err
	}
	for _, r := range guardRules(c) {
		args := append([]string{"-4", "rule", "add"}, r...)
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %s: %s", strings.Join(args, " "), strings.TrimSpace(string(out)))
		}
	}
	return nil
}

// removeGuard deletes every rule at the guard's priorities.
func removeGuard() error {
	var errs []error
	for _, n := range []int{0, 1} {
		p := strconv.Itoa(guardPriority + n)
		for i := 0; ; i++ {
			out, err := exec.Command("ip", "-4", "rule", "show", "priority", p).Output()
			if err != nil {
				return fmt.Errorf("ip -4 rule show priority %s: %w", p, err)
			}
			if strings.TrimSpace(string(out)) == "" {
				break
			}
			if i > 100 {
				errs = append(errs, fmt.Errorf("ip rules at priority %s do not go away: %s", p, out))
				break
			}
			if b, err := exec.Command("ip", "-4", "rule", "del", "priority", p).CombinedOutput(); err != nil {
				errs = append(errs, fmt.Errorf("ip -4 rule del priority %s: %s", p, strings.TrimSpace(string(b))))
				break
			}
		}
	}
	return errors.Join(errs...)
}
