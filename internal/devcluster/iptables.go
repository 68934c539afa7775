package devcluster

import (
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
)

// kubeletChains are the iptables chains the kubelet creates on start (canaries that tell it the
// tables were flushed, the hint chain for kube-proxy's mode detection, and the firewall that
// blocks outside traffic to 127.0.0.0/8). The dev cluster has no kube-proxy, so nothing else.
var kubeletChains = map[string][]string{
	"filter": {"KUBE-FIREWALL", "KUBE-KUBELET-CANARY"},
	"mangle": {"KUBE-IPTABLES-HINT", "KUBE-KUBELET-CANARY"},
	"nat":    {"KUBE-KUBELET-CANARY"},
}

// removeKubeletChains deletes the kubelet's chains and the rules that jump to them, for IPv4 and
// IPv6, so `down` leaves the host's tables as they were.
func removeKubeletChains() error {
	var errs []error
	for _, tool := range []string{"iptables", "ip6tables"} {
		if _, err := exec.LookPath(tool); err != nil {
			continue
		}
		for table, chains := range kubeletChains {
			errs = append(errs, removeChains(tool, table, func(c string) bool { return slices.Contains(chains, c) }))
		}
	}
	return errors.Join(errs...)
}

// removeChains deletes the chains of table that owned selects, with the rules of other chains
// that jump to them.
func removeChains(tool, table string, owned func(chain string) bool) error {
	out, err := exec.Command(tool, "-w", "-t", table, "-S").Output()
	if err != nil {
		return nil // the table does not exist here, so neither do the chains
	}
	var present []string
	var errs []error
	// Rules go first, then chains: a chain is deleted only once nothing jumps to it. Chains of
	// ours that jump to each other are flushed before any is deleted.
	for _, line := range strings.Split(string(out), "\n") {
		fields := ruleFields(line)
		switch {
		case len(fields) == 2 && fields[0] == "-N" && owned(fields[1]):
			present = append(present, fields[1])
		case len(fields) > 3 && fields[0] == "-A" && !owned(fields[1]) && jumpsTo(fields, owned):
			// A rule in another chain that jumps to ours: delete it by its exact spec.
			args := append([]string{"-w", "-t", table, "-D"}, fields[1:]...)
			if b, err := exec.Command(tool, args...).CombinedOutput(); err != nil {
				errs = append(errs, fmt.Errorf("%s %s: %s", tool, strings.Join(args, " "), strings.TrimSpace(string(b))))
			}
		}
	}
	for _, op := range []string{"-F", "-X"} {
		for _, c := range present {
			if b, err := exec.Command(tool, "-w", "-t", table, op, c).CombinedOutput(); err != nil {
				errs = append(errs, fmt.Errorf("%s -t %s %s %s: %s", tool, table, op, c, strings.TrimSpace(string(b))))
			}
		}
	}
	return errors.Join(errs...)
}

// ruleFields splits one line of `iptables -S` into arguments: iptables quotes an argument that
// holds spaces (kube-router's comments do) in double quotes, with \" inside.
func ruleFields(line string) []string {
	var fields []string
	var cur strings.Builder
	inQuote, inField := false, false
	for i := 0; i < len(line); i++ {
		ch := line[i]
		switch {
		case inQuote && ch == '\\' && i+1 < len(line) && line[i+1] == '"':
			cur.WriteByte('"')
			i++
		case ch == '"':
			inQuote, inField = !inQuote, true
		case !inQuote && (ch == ' ' || ch == '\t'):
			if inField {
				fields = append(fields, cur.String())
				cur.Reset()
				inField = false
			}
		default:
			cur.WriteByte(ch)
			inField = true
		}
	}
	if inField {
		fields = append(fields, cur.String())
	}
	return fields
}

func jumpsTo(fields []string, owned func(string) bool) bool {
	for i := 0; i+1 < len(fields); i++ {
		if (fields[i] == "-j" || fields[i] == "-g") && owned(fields[i+1]) {
			return true
		}
	}
	return false
}
