package main

import (
	"errors"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"strings"

	"k8s.io/apimachinery/pkg/types"

	"github.com/paddock-dev/paddock/internal/egresspolicy"
)

// Options are the command-line options.
type Options struct {
	NodeName     string
	ProxyPort    uint
	DNSPort      uint
	UpstreamDNS  string
	CASecret     string
	ClusterCIDRs string
	Kubeconfig   string
	Cleanup      bool
	Version      bool
}

func defaultOptions() *Options {
	return &Options{NodeName: os.Getenv("NODE_NAME"), ProxyPort: 15001, DNSPort: 15053, CASecret: "paddock-system/paddock-egress-ca"}
}

// AddFlags registers the options on fs.
func (o *Options) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.NodeName, "node-name", o.NodeName, "the node whose Pods this instance polices (env NODE_NAME)")
	fs.UintVar(&o.ProxyPort, "proxy-port", o.ProxyPort, "port on the node that policed Pods' TCP is redirected to")
	fs.UintVar(&o.DNSPort, "dns-port", o.DNSPort, "port on the node that policed Pods' DNS (UDP and TCP) is redirected to")
	fs.StringVar(&o.UpstreamDNS, "upstream-dns", o.UpstreamDNS, "resolver (ip:port) the egress DNS and proxy ask; default: the first nameserver of the node's /etc/resolv.conf")
	fs.StringVar(&o.CASecret, "ca-secret", o.CASecret, "namespace/name of the Secret holding the installation's egress CA (tls.crt, tls.key); created when missing")
	fs.StringVar(&o.ClusterCIDRs, "cluster-cidrs", o.ClusterCIDRs, "comma-separated CIDRs of the cluster's pods, Services and nodes, always denied to policed Pods (as the controller's --sandbox-egress-deny-cidrs)")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "kubeconfig; default: in-cluster")
	fs.BoolVar(&o.Cleanup, "cleanup", false, "remove the component's iptables chains and exit (uninstall); policed Pods are no longer redirected")
	fs.BoolVar(&o.Version, "version", false, "print the version and exit")
}

// Validate checks the options, naming the flag and the fix.
func (o *Options) Validate() error {
	if o.Version || o.Cleanup {
		return nil
	}
	var errs []error
	if o.NodeName == "" {
		errs = append(errs, errors.New("--node-name is required (or env NODE_NAME, from the downward API spec.nodeName)"))
	}
	for name, p := range map[string]uint{"--proxy-port": o.ProxyPort, "--dns-port": o.DNSPort} {
		if p == 0 || p > 65535 {
			errs = append(errs, fmt.Errorf("%s %d: a port from 1 to 65535", name, p))
		}
	}
	if o.ProxyPort == o.DNSPort {
		errs = append(errs, fmt.Errorf("--proxy-port and --dns-port are both %d; give them different ports", o.ProxyPort))
	}
	if o.UpstreamDNS != "" {
		if _, err := netip.ParseAddrPort(o.UpstreamDNS); err != nil {
			errs = append(errs, fmt.Errorf("--upstream-dns %q: an ip:port, e.g. 192.0.2.53:53", o.UpstreamDNS))
		}
	}
	if ns, name, ok := strings.Cut(o.CASecret, string(types.Separator)); !ok || ns == "" || name == "" {
		errs = append(errs, fmt.Errorf("--ca-secret %q: namespace/name", o.CASecret))
	}
	if _, err := egresspolicy.AlwaysDeny(o.clusterCIDRs()); err != nil {
		errs = append(errs, fmt.Errorf("--cluster-cidrs: %w", err))
	} else if len(o.clusterCIDRs()) == 0 {
		errs = append(errs, errors.New("--cluster-cidrs is required: the pod, Service and node ranges policed Pods must never reach"))
	}
	return errors.Join(errs...)
}

func (o *Options) clusterCIDRs() []string {
	var out []string
	for _, s := range strings.Split(o.ClusterCIDRs, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}
