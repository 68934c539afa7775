package devcluster

import (
	"errors"
	"fmt"
	"math"
	"net/netip"
	"path/filepath"
	"strconv"

	"github.com/paddock-dev/paddock/internal/standin"
)

// Config is what `paddock dev up` is asked for. Zero values are filled by Defaults.
type Config struct {
	// StateDir holds every file of the cluster: configuration, data, pid files and logs.
	StateDir string
	// SourceDir is a Paddock checkout; its hack/ scripts build the binaries.
	SourceDir string
	// KWOKNodes is the number of fake nodes KWOK manages.
	KWOKNodes int
	// KWOKMaxPods is each fake node's Pod capacity, which bounds how many Pods the fake nodes
	// hold together (KWOKNodes × KWOKMaxPods).
	KWOKMaxPods int

	// NodeIP is the real node's address, on an interface of its own. The API server, the kubelet
	// and CoreDNS listen there so that pods (through the bridge) and the host both reach them.
	NodeIP netip.Addr
	// PodCIDR is the real node's pod range, served by the CNI bridge.
	PodCIDR netip.Prefix
	// ServiceCIDR is the cluster's service range.
	ServiceCIDR netip.Prefix
	// KWOKCIDR is the range KWOK hands out to pods on fake nodes.
	KWOKCIDR netip.Prefix
	// InternetCIDR is the internet stand-in's range (internal/standin): its resolver and named
	// hosts, in a network namespace of their own, routed from the node.
	InternetCIDR netip.Prefix

	Ports Ports

	// GVisor configures containerd's runsc runtime and RuntimeClass gvisor.
	GVisor bool
}

// Ports are the TCP ports of the components. Loopback ones are marked; the rest are on NodeIP.
type Ports struct {
	EtcdClient        int // loopback
	EtcdPeer          int // loopback
	APIServer         int
	ControllerManager int // loopback
	Scheduler         int // loopback
	Kubelet           int
	KubeletHealthz    int // loopback
	Registry          int // loopback
	DNS               int // UDP and TCP
	DNSReady          int // loopback
	KWOK              int
}

// NodeName is the name of the real node.
const NodeName = "paddock-dev"

// Interface names: the node address lives on nodeInterface, pods hang off bridgeInterface.
const (
	nodeInterface   = "paddock-node"
	bridgeInterface = "paddock-br"
)

// DefaultKWOKMaxPods is a fake node's Pod capacity unless --kwok-max-pods says otherwise: the
// kubelet's own default.
const DefaultKWOKMaxPods = 110

// maxKWOKMaxPods bounds --kwok-max-pods; a fake node costs nothing, but a typo should not make
// one node hold a whole benchmark.
const maxKWOKMaxPods = 10000

// KWOKNodeLabel selects the fake nodes KWOK manages (key=value).
const (
	KWOKNodeLabelKey   = "type"
	KWOKNodeLabelValue = "kwok"
)

// Defaults returns the default configuration for stateDir.
func Defaults(stateDir string) Config {
	return Config{
		StateDir:    stateDir,
		GVisor:      true,
		KWOKNodes:   2,
		KWOKMaxPods: DefaultKWOKMaxPods,
		NodeIP:      netip.MustParseAddr("198.18.255.1"),
		PodCIDR:     netip.MustParsePrefix("198.18.0.0/24"),
		// The split of 198.18.0.0/15: pods 198.18.0.0/24, the node 198.18.255.1, KWOK pods
		// 198.19.0.0/18, the internet stand-in 198.19.64.0/24 (of 198.19.64.0/18 kept for it),
		// Services 198.19.128.0/17.
		ServiceCIDR:  netip.MustParsePrefix("198.19.128.0/17"),
		KWOKCIDR:     netip.MustParsePrefix("198.19.0.0/18"),
		InternetCIDR: netip.MustParsePrefix("198.19.64.0/24"),
		Ports: Ports{
			EtcdClient: 23790, EtcdPeer: 23800, APIServer: 6443,
			ControllerManager: 10257, Scheduler: 10259,
			Kubelet: 10250, KubeletHealthz: 10248,
			Registry: 5001, DNS: 53, DNSReady: 18181, KWOK: 10247,
		},
	}
}

// testBed is the only range the cluster may use (RFC 2544 benchmarking), never 10/8,
// 172.16/12 or 192.168/16, whose traffic counts as leaving the machine.
var testBed = netip.MustParsePrefix("198.18.0.0/15")

// Validate reports every invalid field with the flag that fixes it.
func (c Config) Validate() error {
	var errs []error
	if c.StateDir == "" || !filepath.IsAbs(c.StateDir) {
		errs = append(errs, fmt.Errorf("--state-dir %q must be an absolute path", c.StateDir))
	} else if filepath.Clean(c.StateDir) == "/" {
		errs = append(errs, errors.New("--state-dir must not be /: `dev down` removes it"))
	}
	if c.KWOKNodes < 0 || c.KWOKNodes > 1000 {
		errs = append(errs, fmt.Errorf("--kwok-nodes %d is out of range; want 0 to 1000", c.KWOKNodes))
	}
	if c.KWOKMaxPods < 1 || c.KWOKMaxPods > maxKWOKMaxPods {
		errs = append(errs, fmt.Errorf("--kwok-max-pods %d is out of range; want 1 to %d", c.KWOKMaxPods, maxKWOKMaxPods))
	} else if pods, addrs := c.KWOKNodes*c.KWOKMaxPods, kwokAddresses(c.KWOKCIDR); pods > addrs {
		errs = append(errs, fmt.Errorf("--kwok-nodes %d × --kwok-max-pods %d = %d Pods do not fit the KWOK CIDR %s; give fewer", c.KWOKNodes, c.KWOKMaxPods, pods, c.KWOKCIDR))
	}
	if !c.NodeIP.Is4() || !testBed.Contains(c.NodeIP) {
		errs = append(errs, fmt.Errorf("node IP %s must be an IPv4 address in %s", c.NodeIP, testBed))
	}
	ranges := []struct {
		flag string
		p    netip.Prefix
	}{{"pod CIDR", c.PodCIDR}, {"service CIDR", c.ServiceCIDR}, {"KWOK CIDR", c.KWOKCIDR}, {"internet stand-in CIDR", c.InternetCIDR}}
	for i, r := range ranges {
		if !r.p.IsValid() || !r.p.Addr().Is4() || !testBed.Contains(r.p.Addr()) || r.p.Bits() < testBed.Bits() {
			errs = append(errs, fmt.Errorf("%s %s must be an IPv4 range inside %s", r.flag, r.p, testBed))
			continue
		}
		if r.p.Contains(c.NodeIP) {
			errs = append(errs, fmt.Errorf("%s %s must not contain the node IP %s", r.flag, r.p, c.NodeIP))
		}
		for _, o := range ranges[:i] {
			if o.p.IsValid() && o.p.Overlaps(r.p) {
				errs = append(errs, fmt.Errorf("%s %s overlaps %s %s; pick disjoint ranges", r.flag, r.p, o.flag, o.p))
			}
		}
	}
	if c.InternetCIDR.IsValid() && c.InternetCIDR.Bits() > 26 {
		errs = append(errs, fmt.Errorf("internet stand-in CIDR %s is too small; want a /26 or wider (its resolver is the 53rd address)", c.InternetCIDR))
	}
	errs = append(errs, c.Ports.validate()...)
	return errors.Join(errs...)
}

// kwokAddresses is how many Pod IPs KWOK can hand out from the IPv4 range p; an invalid range
// counts as unlimited, as the range check reports it.
func kwokAddresses(p netip.Prefix) int {
	if !p.IsValid() || !p.Addr().Is4() {
		return math.MaxInt
	}
	return 1<<(32-p.Bits()) - 2
}

func (p Ports) validate() []error {
	var errs []error
	seen := map[int]string{}
	for _, np := range p.named() {
		if np.port < 1 || np.port > 65535 {
			errs = append(errs, fmt.Errorf("%s port %d is out of range; want 1 to 65535", np.name, np.port))
			continue
		}
		if other, dup := seen[np.port]; dup {
			errs = append(errs, fmt.Errorf("%s port %d is also the %s port; give each component its own", np.name, np.port, other))
		}
		seen[np.port] = np.name
	}
	return errs
}

type namedPort struct {
	name string
	port int
}

func (p Ports) named() []namedPort {
	return []namedPort{
		{"etcd client", p.EtcdClient}, {"etcd peer", p.EtcdPeer}, {"kube-apiserver", p.APIServer},
		{"kube-controller-manager", p.ControllerManager}, {"kube-scheduler", p.Scheduler},
		{"kubelet", p.Kubelet}, {"kubelet healthz", p.KubeletHealthz}, {"registry", p.Registry},
		{"dns", p.DNS}, {"dns ready", p.DNSReady}, {"kwok", p.KWOK},
	}
}

// RegistryHost is the registry's host:port, the prefix of every image the cluster builds.
func (c Config) RegistryHost() string { return "127.0.0.1:" + strconv.Itoa(c.Ports.Registry) }

// RegistryReaderHost is the registry's read-only address on the node's address, which the
// controller's Pod reaches (the nodes pull from RegistryHost, their loopback): host:port.
func (c Config) RegistryReaderHost() string { return hostPort(c.NodeIP, c.Ports.Registry) }

// RegistryReaderPasswordFile holds the password of the registry's reader address.
func (c Config) RegistryReaderPasswordFile() string { return c.path("registry-reader", "password") }

// APIServerURL is where the API server serves.
func (c Config) APIServerURL() string {
	return "https://" + netip.AddrPortFrom(c.NodeIP, uint16(c.Ports.APIServer)).String()
}

// KubeconfigPath is the admin kubeconfig `up` writes.
func (c Config) KubeconfigPath() string { return c.path("kubeconfig") }

// PauseImage is the pods' sandbox image, which `up` builds and pushes.
func (c Config) PauseImage() string { return c.RegistryHost() + "/pause:dev" }

// BusyboxImage is the shell image `up` builds and pushes.
func (c Config) BusyboxImage() string { return c.RegistryHost() + "/busybox:dev" }

// InternetDir is the internet stand-in's state directory: its CA (standin.CACertPath) and its
// control socket (standin.NewClient).
func (c Config) InternetDir() string { return c.path("internet") }

// InternetResolver is the stand-in's DNS resolver: sandboxes' nameserver on the local cluster.
func (c Config) InternetResolver() netip.Addr {
	p, err := standin.NewPlan(c.InternetCIDR, nil)
	if err != nil {
		return netip.Addr{} // Validate reports the range
	}
	return p.Resolver
}

// kubernetesServiceIP is the first address of the service range, the `kubernetes` Service.
func (c Config) kubernetesServiceIP() netip.Addr { return c.ServiceCIDR.Addr().Next() }

// bridgeGateway is the bridge's address: the pods' default gateway.
func (c Config) bridgeGateway() netip.Addr { return c.PodCIDR.Addr().Next() }

func (c Config) path(elem ...string) string {
	return filepath.Join(append([]string{c.StateDir}, elem...)...)
}
