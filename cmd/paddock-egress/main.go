// Command paddock-egress enforces sandboxes' egress policies on one node (docs/design/egress.md):
// it runs in the node's network namespace, redirects the TCP and DNS of the Pods on its node
// that carry a policy to its proxy and DNS server, and drops the rest of their traffic. It has
// no listener but those two, and answers only addresses it polices.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"syscall"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/paddock-dev/paddock/internal/egressnode"
	"github.com/paddock-dev/paddock/internal/egresspolicy"
	"github.com/paddock-dev/paddock/internal/egressproxy"
	"github.com/paddock-dev/paddock/internal/manager"
	"github.com/paddock-dev/paddock/internal/version"
)

// Exit codes: a configuration error exits 2, a runtime failure 1.
const (
	exitRuntime = 1
	exitConfig  = 2
)

func main() {
	o := defaultOptions()
	fs := flag.NewFlagSet("paddock-egress", flag.ExitOnError)
	o.AddFlags(fs)
	klog.InitFlags(fs)
	_ = fs.Parse(os.Args[1:])
	if err := o.Validate(); err != nil {
		fmt.Fprintf(os.Stderr, "paddock-egress: %v\n", err)
		os.Exit(exitConfig)
	}
	if o.Version {
		fmt.Printf("paddock-egress %s\n", version.Get())
		return
	}
	log := klog.Background().WithName("paddock-egress")
	ctrl.SetLogger(log)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if o.Cleanup {
		if err := egressnode.Cleanup(ctx); err != nil {
			log.Error(err, "removing the egress chains")
			os.Exit(exitRuntime)
		}
		return
	}
	if err := run(ctx, o); err != nil {
		log.Error(err, "paddock-egress stopped")
		klog.Flush()
		os.Exit(exitRuntime)
	}
	klog.Flush()
}

// run serves until ctx ends. The iptables chains stay when it returns: policed Pods have no
// egress while the component is down (their TCP is redirected to a closed port, the rest
// dropped), and the next start rebuilds them from the Pods it finds.
func run(ctx context.Context, o *Options) error {
	log := ctrl.Log
	kube, err := kubeConfig(o.Kubeconfig)
	if err != nil {
		return fmt.Errorf("no API server connection (set --kubeconfig or run in a pod): %w", err)
	}
	mgr, err := ctrl.NewManager(kube, ctrl.Options{
		Scheme:                 manager.NewScheme(),
		Metrics:                metricsserver.Options{BindAddress: "0"}, // no listener a pod could reach
		HealthProbeBindAddress: "0",
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}: {Field: fields.OneTermEqualSelector("spec.nodeName", o.NodeName)},
		}},
	})
	if err != nil {
		return err
	}
	ns, name, _ := strings.Cut(o.CASecret, "/")
	direct, err := client.New(kube, client.Options{Scheme: mgr.GetScheme()})
	if err != nil {
		return err
	}
	ca, err := egressnode.LoadOrCreateCA(ctx, direct, types.NamespacedName{Namespace: ns, Name: name})
	if err != nil {
		return err
	}
	upstream := o.UpstreamDNS
	if upstream == "" {
		if upstream, err = resolvConfNameserver("/etc/resolv.conf"); err != nil {
			return fmt.Errorf("%w; set --upstream-dns", err)
		}
	}
	always, err := egresspolicy.AlwaysDeny(o.clusterCIDRs())
	if err != nil {
		return err
	}
	srv, err := egressproxy.New(egressproxy.Config{
		AlwaysDeny: always, OriginalDst: egressnode.OriginalDst, UpstreamDNS: upstream, CA: ca,
		Log: log.WithName("proxy"),
	})
	if err != nil {
		return err
	}
	if err := serve(ctx, srv, o); err != nil {
		return err
	}
	enableBridgeFiltering(log)
	r := &egressnode.Reconciler{
		Client: mgr.GetClient(), Secrets: mgr.GetAPIReader(), Proxy: srv,
		Rules: &egressnode.IPTables{Ports: egressnode.Ports{Proxy: uint16(o.ProxyPort), DNS: uint16(o.DNSPort)}},
	}
	if err := r.SetupWithManager(mgr); err != nil {
		return err
	}
	log.Info("serving", "node", o.NodeName, "proxyPort", o.ProxyPort, "dnsPort", o.DNSPort, "upstreamDNS", upstream)
	return mgr.Start(ctx)
}

// serve binds the proxy and the DNS server on every address of the node; connections from
// addresses the proxy does not police get nothing.
func serve(ctx context.Context, srv *egressproxy.Server, o *Options) error {
	var lc net.ListenConfig
	tcp, err := lc.Listen(ctx, "tcp4", fmt.Sprintf(":%d", o.ProxyPort))
	if err != nil {
		return err
	}
	udp, err := lc.ListenPacket(ctx, "udp4", fmt.Sprintf(":%d", o.DNSPort))
	if err != nil {
		return err
	}
	dnsTCP, err := lc.Listen(ctx, "tcp4", fmt.Sprintf(":%d", o.DNSPort))
	if err != nil {
		return err
	}
	go func() { _ = srv.Serve(tcp) }()
	go func() { _ = srv.ServeDNS(udp) }()
	go func() { _ = srv.ServeDNSStream(dnsTCP) }()
	go func() {
		<-ctx.Done()
		_, _, _ = tcp.Close(), udp.Close(), dnsTCP.Close()
	}()
	return nil
}

// enableBridgeFiltering makes bridged pod-to-pod traffic pass through iptables, without which
// Pods on one bridge would reach each other around the redirect.
func enableBridgeFiltering(log interface{ Info(string, ...any) }) {
	const path = "/proc/sys/net/bridge/bridge-nf-call-iptables"
	if err := os.WriteFile(path, []byte("1"), 0o644); err != nil {
		log.Info("cannot turn on bridge filtering; Pods on one bridge may reach each other directly (load br_netfilter)", "err", err.Error())
	}
}

// resolvConfNameserver is the first IPv4 nameserver of a resolv.conf, as ip:53.
func resolvConfNameserver(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "nameserver" {
			if a, err := netip.ParseAddr(fields[1]); err == nil && a.Is4() {
				return netip.AddrPortFrom(a, 53).String(), nil
			}
		}
	}
	return "", fmt.Errorf("no IPv4 nameserver in %s", path)
}

func kubeConfig(path string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = path
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
}
