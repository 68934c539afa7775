package devcluster

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/netip"
	"path/filepath"
	"strconv"
	"strings"

	snapshotsv1alpha1 "github.com/paddock-dev/paddock/api/snapshots/v1alpha1"
)

// The functions in this file are pure: they render the configuration files and command lines of
// the components from a Config, so their output is table-tested without a cluster.

// ClusterDomain is the cluster's DNS domain.
const ClusterDomain = "cluster.local"

// StorageClassName is the default StorageClass that the dev provisioner serves.
const StorageClassName = "standard"

// PodPidsLimit is the most processes (threads count) one pod may run on the dev node.
const PodPidsLimit = 1024

// ProvisionerName is the provisioner field of StorageClassName.
const ProvisionerName = "paddock.dev/hostpath"

func hostPort(a netip.Addr, port int) string { return netip.AddrPortFrom(a, uint16(port)).String() }

func loopback(port int) string { return "127.0.0.1:" + strconv.Itoa(port) }

func etcdArgs(c Config) []string {
	client := "http://" + loopback(c.Ports.EtcdClient)
	peer := "http://" + loopback(c.Ports.EtcdPeer)
	return []string{
		"--name=paddock-dev",
		"--data-dir=" + c.path("etcd"),
		"--listen-client-urls=" + client, "--advertise-client-urls=" + client,
		"--listen-peer-urls=" + peer, "--initial-advertise-peer-urls=" + peer,
		"--initial-cluster=paddock-dev=" + peer,
		// A dev cluster trades durability on power loss for speed on a shared disk.
		"--unsafe-no-fsync",
		"--listen-metrics-urls=",
	}
}

func apiServerArgs(c Config) []string {
	return []string{
		"--etcd-servers=http://" + loopback(c.Ports.EtcdClient),
		"--bind-address=" + c.NodeIP.String(), "--advertise-address=" + c.NodeIP.String(),
		"--secure-port=" + strconv.Itoa(c.Ports.APIServer),
		"--tls-cert-file=" + c.path("pki", "apiserver.crt"), "--tls-private-key-file=" + c.path("pki", "apiserver.key"),
		"--client-ca-file=" + c.path("pki", "ca.crt"),
		"--service-account-issuer=https://kubernetes.default.svc." + ClusterDomain,
		"--service-account-key-file=" + c.path("pki", "sa.pub"),
		"--service-account-signing-key-file=" + c.path("pki", "sa.key"),
		"--token-auth-file=" + c.path("pki", "tokens.csv"),
		// The kubelet authenticates the API server by this certificate (system:masters), and
		// nobody else: it serves no anonymous request.
		"--kubelet-client-certificate=" + c.path("pki", kubeletClientCert),
		"--kubelet-client-key=" + c.path("pki", kubeletClientKey),
		"--authorization-mode=Node,RBAC",
		"--service-cluster-ip-range=" + c.ServiceCIDR.String(),
		"--allow-privileged=true",
		// The node's hostname resolves nowhere; the API server reaches the kubelet by address.
		"--kubelet-preferred-address-types=InternalIP",
		"--profiling=false",
	}
}

func controllerManagerArgs(c Config) []string {
	kubeconfig := c.KubeconfigPath()
	return []string{
		"--kubeconfig=" + kubeconfig,
		"--authentication-kubeconfig=" + kubeconfig, "--authorization-kubeconfig=" + kubeconfig,
		"--bind-address=127.0.0.1", "--secure-port=" + strconv.Itoa(c.Ports.ControllerManager),
		"--leader-elect=false",
		// The CNI bridge hands out pod addresses itself; node IPAM would only fight it.
		"--controllers=*,-nodeipam",
		"--service-account-private-key-file=" + c.path("pki", "sa.key"),
		"--root-ca-file=" + c.path("pki", "ca.crt"),
		"--use-service-account-credentials=true",
		"--cluster-name=paddock-dev",
		"--profiling=false",
	}
}

func schedulerArgs(c Config) []string {
	kubeconfig := c.KubeconfigPath()
	return []string{
		"--kubeconfig=" + kubeconfig,
		"--authentication-kubeconfig=" + kubeconfig, "--authorization-kubeconfig=" + kubeconfig,
		"--bind-address=127.0.0.1", "--secure-port=" + strconv.Itoa(c.Ports.Scheduler),
		"--leader-elect=false",
		"--profiling=false",
	}
}

func kubeletArgs(c Config) []string {
	return []string{
		"--config=" + c.path("kubelet", "config.yaml"),
		"--kubeconfig=" + c.path("kubelet", "kubeconfig"),
		"--root-dir=" + c.path("kubelet", "root"),
		"--hostname-override=" + NodeName,
		"--node-ip=" + c.NodeIP.String(),
		"--node-labels=paddock.dev/node=real",
	}
}

// kwokArgs points KWOK at the fake nodes, with its configuration and stages.
func kwokArgs(c Config, stageFiles []string) []string {
	args := []string{
		"--kubeconfig=" + c.KubeconfigPath(),
		"--manage-nodes-with-label-selector=" + KWOKNodeLabelKey + "=" + KWOKNodeLabelValue,
		"--cidr=" + c.KWOKCIDR.String(),
		"--node-ip=" + c.NodeIP.String(),
		"--node-port=" + strconv.Itoa(c.Ports.KWOK),
		// KWOK's server authenticates nobody and serves /metrics whatever its configuration, so
		// it listens on loopback only: pods cannot reach it. The fake nodes still report the node
		// address, so the API server's logs and exec requests for KWOK pods are refused there
		// instead of reaching anything else.
		"--server-address=" + loopback(c.Ports.KWOK),
		"--config=" + c.path("kwok", "kwok.yaml"),
	}
	for _, f := range stageFiles {
		args = append(args, "--config="+f)
	}
	return args
}

// containerdConfig renders containerd's configuration (format version 2, containerd 1.6) with
// snapshotter for the CRI's images. With gvisorDir it adds the runsc runtime (gVisor's own shim:
// runc's shim cannot drive runsc), which RuntimeClass gvisor names as its handler, and passes the
// one Pod annotation that shim acts on (a restore from a memory checkpoint) through to its specs.
func containerdConfig(c Config, gvisorDir, snapshotter string) string {
	d := c.path("containerd")
	reg := c.RegistryHost()
	runsc := ""
	if gvisorDir != "" {
		runsc = fmt.Sprintf(`    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.%[1]s]
      runtime_type = "io.containerd.runsc.v1"
      runtime_path = %[2]q
      pod_annotations = [%[4]q]
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.%[1]s.options]
        TypeUrl = "io.containerd.runsc.v1.options"
        ConfigPath = %[3]q
`, gvisorHandler, filepath.Join(gvisorDir, "containerd-shim-runsc-v1"), c.runscConfigPath(), snapshotsv1alpha1.RestoreFromAnnotation)
	}
	return fmt.Sprintf(`version = 2
root = %[1]q
state = %[2]q

[grpc]
  address = %[3]q

[ttrpc]
  address = %[4]q

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %[5]q
  # The kubelet asks for oom_score_adj -998, which a process without CAP_SYS_RESOURCE may not set;
  # without this every sandbox fails in runc's nsexec.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = %[10]q
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
%[9]s  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = %[6]q
  [plugins."io.containerd.grpc.v1.cri".registry.mirrors.%[7]q]
    endpoint = [%[8]q]
`, d+"/root", d+"/state", d+"/containerd.sock", d+"/containerd.sock.ttrpc",
		c.PauseImage(), c.path("cni", "net.d"), reg, "http://"+reg, runsc, snapshotter)
}

// ContainerdSocket is the CRI endpoint of the node's containerd.
func (c Config) ContainerdSocket() string { return c.path("containerd", "containerd.sock") }

// cniConfig renders the bridge network: host-local IPAM on the pod range with the bridge as the
// gateway, so the host reaches every pod IP directly. No masquerading: pods talk to the node
// and each other only, and the host keeps no iptables rule of ours.
func cniConfig(c Config) string {
	conf := map[string]any{
		"cniVersion": "0.4.0",
		"name":       "paddock-dev",
		"plugins": []any{
			map[string]any{
				"type":      "bridge",
				"bridge":    bridgeInterface,
				"isGateway": true,
				"ipMasq":    false,
				"ipam": map[string]any{
					"type":    "host-local",
					"dataDir": c.path("cni", "ipam"),
					"ranges":  []any{[]any{map[string]any{"subnet": c.PodCIDR.String(), "gateway": c.bridgeGateway().String()}}},
					"routes":  []any{map[string]any{"dst": "0.0.0.0/0"}},
				},
			},
			map[string]any{"type": "loopback"},
		},
	}
	out, _ := json.MarshalIndent(conf, "", "  ")
	return string(out) + "\n"
}

// kubeletConfig renders the KubeletConfiguration of a dev node: QoS and pod cgroups under the
// cgroup root `up` made for it (KubeletCgroupRoot), which in-place resize needs; no node
// allocatable enforcement and no eviction, since the machine is shared with everything else.
func kubeletConfig(c Config) string {
	conf := map[string]any{
		"apiVersion":               "kubelet.config.k8s.io/v1beta1",
		"kind":                     "KubeletConfiguration",
		"address":                  c.NodeIP.String(),
		"port":                     c.Ports.Kubelet,
		"readOnlyPort":             0,
		"healthzBindAddress":       "127.0.0.1",
		"healthzPort":              c.Ports.KubeletHealthz,
		"containerRuntimeEndpoint": "unix://" + c.ContainerdSocket(),
		"failCgroupV1":             false,
		"cgroupDriver":             "cgroupfs",
		"cgroupsPerQOS":            true,
		"cgroupRoot":               KubeletCgroupRoot,
		"enforceNodeAllocatable":   []string{},
		"failSwapOn":               false,
		// Report ephemeral-storage capacity (the kubelet root dir's filesystem) so that pods
		// requesting it, as upstream's python-sandbox-template does, schedule here.
		"localStorageCapacityIsolation": true,
		// No pod may take the node's PID table: a fork bomb in one sandbox stops at this many.
		"podPidsLimit":  PodPidsLimit,
		"clusterDNS":    []string{c.NodeIP.String()},
		"clusterDomain": ClusterDomain,
		"resolvConf":    c.path("kubelet", "resolv.conf"),
		"podLogsDir":    c.path("kubelet", "pod-logs"),
		// Anonymous requests get 401; the API server presents its client certificate, anything
		// else a token the API server reviews, and every request is authorized by it. Pods
		// reach the node's address, so an open kubelet would run commands in every pod for them.
		"authentication": map[string]any{
			"anonymous": map[string]any{"enabled": false},
			"webhook":   map[string]any{"enabled": true},
			"x509":      map[string]any{"clientCAFile": c.path("pki", "ca.crt")},
		},
		"authorization":               map[string]any{"mode": "Webhook"},
		"evictionHard":                map[string]string{"memory.available": "0%", "nodefs.available": "0%", "nodefs.inodesFree": "0%", "imagefs.available": "0%"},
		"imageGCHighThresholdPercent": 100,
		"serializeImagePulls":         false,
		"maxPods":                     110,
	}
	out, _ := json.MarshalIndent(conf, "", "  ")
	return string(out) + "\n"
}

// kwokConfig renders KWOK's own configuration: no debugging handlers, so no pprof (a heap
// profile would hold the admin token KWOK uses) and no exec, attach or port-forward. A
// configuration file replaces KWOK's defaults, so the rest restates them (KWOK v0.8).
func kwokConfig() string {
	return `apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokConfiguration
options:
  enableDebuggingHandlers: false
  enableProfilingHandler: false
  enableContentionProfiling: false
  podPlayStageParallelism: 4
  nodePlayStageParallelism: 4
  nodeLeaseParallelism: 4
  podsOnNodeSyncParallelism: 1
  enablePodsOnNodeSyncListPager: true
  enablePodsOnNodeSyncStreamWatch: false
`
}

// kubeletResolvConf is the upstream resolver file of pods: only the cluster DNS, so no pod query
// ever leaves the machine.
func kubeletResolvConf(c Config) string { return "nameserver " + c.NodeIP.String() + "\n" }

// corefile renders CoreDNS's configuration: the kubernetes plugin answers for the cluster domain
// and reverse zones; every other name goes to the internet stand-in's resolver, the only
// "outside" this cluster has (it knows .test names and nothing else).
func corefile(c Config) string {
	return fmt.Sprintf(`.:%d {
    bind %s
    errors
    ready %s
    kubernetes %s in-addr.arpa ip6.arpa {
        kubeconfig %s paddock-dev
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
        ttl 5
    }
    forward . %s
    cache 5
    loadbalance
}
`, c.Ports.DNS, c.NodeIP, loopback(c.Ports.DNSReady), ClusterDomain, c.KubeconfigPath(), c.InternetResolver())
}

// kubeconfig renders a kubeconfig with one cluster, one token user and one context, all named
// paddock-dev.
func kubeconfig(server string, caPEM []byte, token string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: paddock-dev
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: paddock-dev
  user:
    token: %s
contexts:
- name: paddock-dev
  context:
    cluster: paddock-dev
    user: paddock-dev
current-context: paddock-dev
`, server, base64.StdEncoding.EncodeToString(caPEM), token)
}

// tokens are the static bearer tokens of the cluster's two users.
type tokens struct {
	Admin   string
	Kubelet string
}

// tokenFile renders the API server's --token-auth-file: token,user,uid,"group1,group2".
func tokenFile(t tokens) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s,paddock-admin,paddock-admin,\"system:masters\"\n", t.Admin)
	fmt.Fprintf(&b, "%s,system:node:%s,system:node:%s,\"system:nodes\"\n", t.Kubelet, NodeName, NodeName)
	return b.String()
}

// parseTokenFile reads back what tokenFile wrote.
func parseTokenFile(data string) (tokens, error) {
	var t tokens
	for _, line := range strings.Split(strings.TrimSpace(data), "\n") {
		fields := strings.SplitN(line, ",", 3)
		if len(fields) < 3 {
			return tokens{}, fmt.Errorf("token file line %q has fewer than 3 fields", line)
		}
		switch fields[1] {
		case "paddock-admin":
			t.Admin = fields[0]
		case "system:node:" + NodeName:
			t.Kubelet = fields[0]
		}
	}
	if t.Admin == "" || t.Kubelet == "" {
		return tokens{}, fmt.Errorf("token file lacks the admin or kubelet token")
	}
	return t, nil
}
