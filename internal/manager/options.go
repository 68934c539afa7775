// Package manager turns the controller manager's command line into a running controller-runtime
// manager: typed options with validation, then named setup steps that main calls in order.
package manager

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/paddock-dev/paddock/api/sandboxd"
	"github.com/paddock-dev/paddock/internal/blueprint"
	"github.com/paddock-dev/paddock/internal/controller/sandbox"
	"github.com/paddock-dev/paddock/internal/controller/sandboxclaim"
	"github.com/paddock-dev/paddock/internal/controller/sandboxtemplate"
	"github.com/paddock-dev/paddock/internal/controller/sandboxwarmpool"
	"github.com/paddock-dev/paddock/internal/egress"
	"github.com/paddock-dev/paddock/internal/imageconfig"
)

// Options is the controller manager's configuration. Flag names follow the reference controller
// so that existing deployment manifests keep working.
type Options struct {
	MetricsBindAddress string
	// MetricsSecure serves /metrics (and pprof) over HTTPS to callers the API server
	// authenticates and authorizes (get on the non-resource URL, ClusterRole
	// paddock-metrics-reader); false serves everybody over plain HTTP.
	MetricsSecure          bool
	HealthProbeBindAddress string

	LeaderElect             bool
	LeaderElectionNamespace string
	LeaderElectionID        string

	// Extensions enables the SandboxTemplate, SandboxWarmPool and SandboxClaim controllers.
	Extensions    bool
	ClusterDomain string

	EnableTracing bool
	EnablePprof   bool

	KubeAPIQPS   float64
	KubeAPIBurst int

	SandboxWorkers int
	// SandboxStatusCoalesceWindow is how long a Sandbox status change that only reports start-up
	// progress may wait to be written together with the next change.
	SandboxStatusCoalesceWindow time.Duration
	SandboxClaimWorkers         int
	// SandboxClaimResizeGiveUp is how long a claim waits for its warm Sandbox's in-place resize
	// before it starts a cold one (docs/design/warm-resources.md).
	SandboxClaimResizeGiveUp time.Duration
	SandboxWarmPoolWorkers   int
	SandboxTemplateWorkers   int

	// SandboxWriteBehindWindow holds back the metadata patch of a Sandbox's owned Pod, so that
	// edits in quick succession cost one write; 0 (the default) patches at once.
	SandboxWriteBehindWindow time.Duration

	// IdleController runs the idle controller (scale to zero): Sandboxes whose policy sets
	// paddock.dev/idle-timeout are suspended after that long without activity.
	IdleController bool

	WarmPoolMaxBatchSize                 int
	WarmPoolReplenishDelay               time.Duration
	WarmPoolMaxRefillRate                float64
	WarmPoolMaxStarting                  int
	WarmPoolReadinessGracePeriod         time.Duration
	WarmPoolUnschedulableRecheckInterval time.Duration
	EnableWarmPoolEviction               bool

	// CacheLabelSelectors limits the Pod and Service caches to objects with the sandbox-name-hash
	// label (sandbox.LabelScopedCacheOptions).
	CacheLabelSelectors bool
	DisableClaimEvents  bool
	// ClaimObservabilityAnnotations writes agents.x-k8s.io/sandbox-name and
	// agents.x-k8s.io/controller-first-observed-at on each claim after it turns Ready.
	ClaimObservabilityAnnotations bool
	// DisableClaimObservabilityAnnotations is upstream's flag; Paddock writes no such annotations
	// unless ClaimObservabilityAnnotations asks, so it only conflicts with that option.
	DisableClaimObservabilityAnnotations bool

	// Snapshot* configure SandboxSnapshots (docs/design/snapshots.md): where images are pushed,
	// the image of the capture Pods and the node paths they mount. Without a repository and an
	// image, snapshots stay Pending with reason CaptureNotConfigured.
	SnapshotRepository       string
	SnapshotCaptureImage     string
	SnapshotInsecureRegistry bool
	SnapshotContainerdSocket string
	SnapshotNodePaths        []string
	// SnapshotRunsc is the nodes' runsc binary, for captures of gVisor Sandboxes.
	SnapshotRunsc string
	// SnapshotCaptureNamespace is where capture Pods run; empty means the controller's own.
	SnapshotCaptureNamespace string
	// SnapshotMemoryMaxBytes caps the memory image of a Pod without memory limits on every
	// container; SnapshotMemoryCheckpointTimeout bounds a checkpoint, and
	// SnapshotMemoryRestoreTimeout a restoring Pod's way to Ready (suspend: memory).
	SnapshotMemoryMaxBytes          int64
	SnapshotMemoryCheckpointTimeout time.Duration
	SnapshotMemoryRestoreTimeout    time.Duration

	// RouterNamespace and RouterPodLabels are what the default NetworkPolicy of a template admits.
	RouterNamespace string
	RouterPodLabels map[string]string
	// ControllerPodLabels select this controller's Pods in its own namespace, which a template's
	// default NetworkPolicy admits as well (the controller calls sandboxd).
	ControllerPodLabels map[string]string
	// SandboxClientPodLabels select the Pods of a sandbox's own namespace that a template's
	// default NetworkPolicy admits besides the router and the controller (the
	// upstream-unauthenticated-migration profile: the namespace labels its clients).
	SandboxClientPodLabels map[string]string
	// SandboxdAllowUnauthenticatedNetwork (UNSAFE) sets SANDBOXD_ALLOW_UNAUTHENTICATED_NETWORK on
	// every sandbox: sandboxd serves tokenless calls from the pod network, as upstream's do.
	SandboxdAllowUnauthenticatedNetwork bool

	// SandboxEgressDenyCIDRs (nil unless set) replaces discovery of the ranges the default
	// NetworkPolicy denies besides the private and link-local defaults; SandboxEgressDiscovery
	// turns discovery on (the default).
	SandboxEgressDenyCIDRs []string
	SandboxEgressDiscovery bool
	// SandboxEgressProxyPorts are the node ports paddock-egress serves (proxy, DNS), which the
	// default NetworkPolicy admits when set: policed Pods' traffic reaches them redirected.
	SandboxEgressProxyPorts []int32
	// SandboxNameservers are the DNS servers of sandboxes under a template's default
	// NetworkPolicy, which denies the cluster's DNS (public resolvers by default; the local
	// dev cluster's internet stand-in there).
	SandboxNameservers []string

	// AllowedLabelDomainsFile lists the label domains a claim's additionalPodMetadata may use,
	// one per line; a missing file means the built-in list.
	AllowedLabelDomainsFile string

	// SandboxCredentials gives every Sandbox its own tokens (docs/design/credentials.md), derived
	// from the key in CredentialsSecret ("namespace/name"; empty: credentials.KeySecretName in
	// the controller's namespace), which the controller creates when it is missing.
	SandboxCredentials bool
	CredentialsSecret  string

	// SandboxdImage is the image sandboxd is copied from into Pods whose pod template asks for
	// it (paddock.dev/inject-sandboxd, docs/byo-image.md); empty refuses such Sandboxes.
	SandboxdImage string
	// ImageConfigMirrors maps registries that images name to where the Sandbox controller reads
	// their configs instead (--image-config-registry-mirror; docs/byo-image.md). Empty, the
	// default, reads every image from the registry it names.
	ImageConfigMirrors imageconfig.Mirrors
	// ImageConfigMirrorCredentials is a docker config file (a mounted kubernetes.io/
	// dockerconfigjson Secret) whose credentials for a mirror's host are sent to that mirror
	// (--image-config-registry-mirror-credentials).
	ImageConfigMirrorCredentials string
	// ImageConfigLastsAfter is how long a registry that does not answer is retried as a blip
	// (imageconfig.DefaultLastsAfter when zero). It has no flag: tests shorten it.
	ImageConfigLastsAfter time.Duration

	ShowVersion bool

	// AllowDuplicateControllers lets one process run several managers, as tests of leader
	// election do; controller-runtime otherwise refuses a second controller of the same name.
	// It has no flag.
	AllowDuplicateControllers bool
}

// NewOptions returns the defaults, which match the reference controller's. Each controller's own
// defaults are taken from its package, so the flags and the controllers cannot disagree.
func NewOptions() *Options {
	template, pool, claim := sandboxtemplate.DefaultOptions(), sandboxwarmpool.DefaultOptions(), sandboxclaim.DefaultOptions()
	return &Options{
		MetricsBindAddress:                   ":8080",
		HealthProbeBindAddress:               ":8081",
		LeaderElect:                          true,
		LeaderElectionID:                     "paddock-controller.agents.x-k8s.io",
		ClusterDomain:                        sandbox.DefaultClusterDomain,
		KubeAPIQPS:                           -1,
		KubeAPIBurst:                         10,
		SandboxWorkers:                       sandbox.DefaultWorkers,
		SandboxStatusCoalesceWindow:          sandbox.DefaultStatusCoalesceWindow,
		SandboxClaimWorkers:                  claim.Workers,
		SandboxClaimResizeGiveUp:             claim.ResizeGiveUpAfter,
		SandboxWarmPoolWorkers:               pool.Workers,
		SandboxTemplateWorkers:               template.Workers,
		WarmPoolMaxBatchSize:                 pool.MaxBatchSize,
		WarmPoolReplenishDelay:               pool.ReplenishDelay,
		WarmPoolMaxRefillRate:                pool.MaxRefillRate,
		WarmPoolMaxStarting:                  pool.MaxStarting,
		WarmPoolReadinessGracePeriod:         pool.ReadinessGracePeriod,
		WarmPoolUnschedulableRecheckInterval: pool.UnschedulableRecheckInterval,
		EnableWarmPoolEviction:               pool.SafeToEvict,
		RouterNamespace:                      template.RouterNamespace,
		RouterPodLabels:                      template.RouterPodLabels,
		ControllerPodLabels:                  template.ControllerPodLabels,
		SandboxEgressDiscovery:               template.EgressDiscovery,
		SandboxNameservers:                   append([]string(nil), blueprint.PublicNameservers...),
		AllowedLabelDomainsFile:              "/etc/sandbox-config/allowed-label-domains",
		SandboxCredentials:                   true,
		MetricsSecure:                        true,
		IdleController:                       true,
		SnapshotMemoryMaxBytes:               sandbox.DefaultMemoryImageMaxBytes,
		SnapshotMemoryCheckpointTimeout:      sandbox.DefaultCheckpointTimeout,
		SnapshotMemoryRestoreTimeout:         sandbox.DefaultRestoreTimeout,
	}
}

// AddFlags registers every option on fs. Go's flag package accepts -name and --name alike, as
// the reference controller does.
func (o *Options) AddFlags(fs *flag.FlagSet) {
	fs.BoolVar(&o.ShowVersion, "version", o.ShowVersion, "Print the version and exit.")
	fs.StringVar(&o.MetricsBindAddress, "metrics-bind-address", o.MetricsBindAddress, "Address the Prometheus metrics endpoint listens on; \"0\" disables it.")
	fs.BoolVar(&o.MetricsSecure, "metrics-secure", o.MetricsSecure, "Serve /metrics over HTTPS to callers with get on the non-resource URL /metrics (ClusterRole paddock-metrics-reader), checked with TokenReview and SubjectAccessReview; false (UNSAFE) serves every caller over plain HTTP.")
	fs.StringVar(&o.HealthProbeBindAddress, "health-probe-bind-address", o.HealthProbeBindAddress, "Address /healthz and /readyz listen on.")
	fs.BoolVar(&o.LeaderElect, "leader-elect", o.LeaderElect, "Elect a leader through a Lease so that only one replica reconciles at a time.")
	fs.StringVar(&o.LeaderElectionNamespace, "leader-election-namespace", o.LeaderElectionNamespace, "Namespace of the leader-election Lease; empty means the namespace the controller runs in.")
	fs.StringVar(&o.LeaderElectionID, "leader-election-id", o.LeaderElectionID, "Name of the leader-election Lease.")
	fs.BoolVar(&o.Extensions, "extensions", o.Extensions, "Also run the SandboxTemplate, SandboxWarmPool and SandboxClaim controllers.")
	fs.StringVar(&o.ClusterDomain, "cluster-domain", o.ClusterDomain, "Cluster DNS domain, used in status.serviceFQDN.")
	fs.BoolVar(&o.EnableTracing, "enable-tracing", o.EnableTracing, "Export OpenTelemetry traces over OTLP (configured by the standard OTEL_EXPORTER_OTLP_* variables).")
	fs.BoolVar(&o.EnablePprof, "enable-pprof", o.EnablePprof, "Serve /debug/pprof/ on the metrics address.")
	fs.Float64Var(&o.KubeAPIQPS, "kube-api-qps", o.KubeAPIQPS, "Client-side queries per second to the API server; negative disables the client-side limiter.")
	fs.IntVar(&o.KubeAPIBurst, "kube-api-burst", o.KubeAPIBurst, "Client-side burst to the API server; must be positive.")
	fs.IntVar(&o.SandboxWorkers, "sandbox-concurrent-workers", o.SandboxWorkers, "Sandboxes reconciled in parallel.")
	fs.DurationVar(&o.SandboxStatusCoalesceWindow, "sandbox-status-coalesce-window", o.SandboxStatusCoalesceWindow,
		"How long a Sandbox status change that only reports start-up progress (Pod pending or scheduled, not Ready) may wait to be written with the next change; 0 writes every change at once.")
	fs.IntVar(&o.SandboxClaimWorkers, "sandbox-claim-concurrent-workers", o.SandboxClaimWorkers, "SandboxClaims reconciled in parallel.")
	fs.DurationVar(&o.SandboxClaimResizeGiveUp, "sandbox-claim-resize-give-up", o.SandboxClaimResizeGiveUp, "How long a claim waits for its warm Sandbox's in-place resize (deferred by the node, or in progress) before it discards the Sandbox and starts a cold one.")
	fs.IntVar(&o.SandboxWarmPoolWorkers, "sandbox-warm-pool-concurrent-workers", o.SandboxWarmPoolWorkers, "SandboxWarmPools reconciled in parallel.")
	fs.IntVar(&o.SandboxTemplateWorkers, "sandbox-template-concurrent-workers", o.SandboxTemplateWorkers, "SandboxTemplates reconciled in parallel.")
	fs.DurationVar(&o.SandboxWriteBehindWindow, "sandbox-write-behind-window", o.SandboxWriteBehindWindow, "Hold back the metadata patch of a Sandbox's existing Pod this long after a change is first seen, to coalesce edits (capped at 1s); 0 patches at once.")
	fs.BoolVar(&o.IdleController, "idle-controller", o.IdleController, "Suspend Sandboxes whose paddock.dev/idle-timeout (on the Sandbox, its claim or its template) ran out without activity; false ignores idle policies.")
	fs.IntVar(&o.WarmPoolMaxBatchSize, "sandbox-warm-pool-max-batch-size", o.WarmPoolMaxBatchSize, "Most Sandboxes a pool creates or deletes in one pass.")
	fs.DurationVar(&o.WarmPoolReplenishDelay, "sandbox-warm-pool-replenish-delay", o.WarmPoolReplenishDelay, "Delay before a pool refills after a member is claimed; 0 refills at once.")
	fs.Float64Var(&o.WarmPoolMaxRefillRate, "sandbox-warm-pool-max-refill-rate", o.WarmPoolMaxRefillRate, "Most Sandboxes per second one pool creates; 0 means no limit.")
	fs.IntVar(&o.WarmPoolMaxStarting, "sandbox-warm-pool-max-starting", o.WarmPoolMaxStarting, "Most members of one pool starting (created, not yet Ready) at once while at least half of the pool's replicas are Ready; the next is created when one is Ready, so a refill leaves the node's CPU to the claims being served. A pool with fewer Ready members starts every missing one at once. 0 means no limit.")
	fs.DurationVar(&o.WarmPoolReadinessGracePeriod, "sandbox-warm-pool-readiness-grace-period", o.WarmPoolReadinessGracePeriod, "How long a pool member may stay not Ready before it is replaced.")
	fs.DurationVar(&o.WarmPoolUnschedulableRecheckInterval, "sandbox-warm-pool-unschedulable-recheck-interval", o.WarmPoolUnschedulableRecheckInterval, "How often a pool holding unschedulable members checks them again.")
	fs.BoolVar(&o.EnableWarmPoolEviction, "enable-warm-pool-eviction", o.EnableWarmPoolEviction, "Mark unclaimed pool Pods safe to evict for the cluster autoscaler.")
	fs.BoolVar(&o.CacheLabelSelectors, "cache-label-selectors", o.CacheLabelSelectors, "Cache only Pods and Services that carry the agents.x-k8s.io/sandbox-name-hash label; a Pod or Service made outside Paddock for a Sandbox to adopt must then carry it.")
	fs.BoolVar(&o.DisableClaimEvents, "disable-claim-events", o.DisableClaimEvents, "Emit no Events for SandboxClaims.")
	fs.BoolVar(&o.ClaimObservabilityAnnotations, "claim-observability-annotations", o.ClaimObservabilityAnnotations,
		"Write the claim annotations agents.x-k8s.io/sandbox-name and agents.x-k8s.io/controller-first-observed-at after the claim turns Ready, in a separate patch (one more write per claim).")
	fs.BoolVar(&o.DisableClaimObservabilityAnnotations, "disable-claim-observability-annotations", o.DisableClaimObservabilityAnnotations,
		"Upstream's flag, accepted for compatibility: the annotations are written only with --claim-observability-annotations, and the two flags together are refused.")
	fs.StringVar(&o.RouterNamespace, "router-namespace", o.RouterNamespace, "Namespace of paddock-router; a template's default NetworkPolicy admits traffic from it.")
	fs.StringVar(&o.AllowedLabelDomainsFile, "allowed-label-domains-file", o.AllowedLabelDomainsFile, "File listing, one per line, the label domains a claim's additionalPodMetadata may use; a missing file means the built-in list.")
	fs.Func("sandbox-egress-deny-cidrs", "Comma-separated CIDRs or addresses a template's default NetworkPolicy denies egress to, besides 10/8, 172.16/12, 192.168/16, 169.254/16, fc00::/7 and fe80::/10; set, it replaces discovery (--sandbox-egress-discovery).",
		func(s string) error {
			o.SandboxEgressDenyCIDRs = []string{}
			for _, c := range strings.Split(s, ",") {
				if c = strings.TrimSpace(c); c != "" {
					o.SandboxEgressDenyCIDRs = append(o.SandboxEgressDenyCIDRs, c)
				}
			}
			return egress.Validate(o.SandboxEgressDenyCIDRs)
		})
	fs.Func("sandbox-nameservers", "Comma-separated IP addresses (at most 3) of the DNS servers of sandboxes under a template's default NetworkPolicy, which denies the cluster's DNS (default "+strings.Join(blueprint.PublicNameservers, ",")+").",
		func(s string) error {
			o.SandboxNameservers = nil
			for _, a := range strings.Split(s, ",") {
				if a = strings.TrimSpace(a); a != "" {
					o.SandboxNameservers = append(o.SandboxNameservers, a)
				}
			}
			return blueprint.ValidateNameservers(o.SandboxNameservers)
		})
	fs.Func("sandbox-egress-proxy-ports", "Comma-separated ports (TCP and UDP) a template's default NetworkPolicy admits egress to, at any address: set them to paddock-egress's --proxy-port and --dns-port (15001,15053) when it is installed, whose node redirects policed sandboxes' traffic there, after which the NetworkPolicy sees the node's port, not the destination. Empty (the default) admits none.",
		func(s string) error {
			o.SandboxEgressProxyPorts = nil
			for _, f := range strings.Split(s, ",") {
				if f = strings.TrimSpace(f); f == "" {
					continue
				}
				p, err := strconv.ParseUint(f, 10, 16)
				if err != nil || p == 0 {
					return fmt.Errorf("%q is not a port from 1 to 65535; give e.g. 15001,15053", f)
				}
				o.SandboxEgressProxyPorts = append(o.SandboxEgressProxyPorts, int32(p))
			}
			return nil
		})
	fs.BoolVar(&o.SandboxEgressDiscovery, "sandbox-egress-discovery", o.SandboxEgressDiscovery,
		"Deny the default NetworkPolicy's egress to the cluster's own ranges, discovered from Nodes (podCIDRs, InternalIPs), ServiceCIDRs and the kubernetes Service's EndpointSlices.")

	fs.BoolVar(&o.SandboxCredentials, "sandbox-credentials", o.SandboxCredentials,
		"Give every Sandbox its own sandboxd tokens: a Secret <sandbox>-credentials and SANDBOXD_TOKEN/SANDBOXD_CONTROL_TOKEN in every container. false is UNSAFE: sandboxd then needs its own token configuration (docs/security.md).")
	fs.StringVar(&o.CredentialsSecret, "credentials-secret", o.CredentialsSecret,
		"Secret holding the credentials key, as namespace/name; created when missing. Empty means paddock-credentials-key in the controller's namespace.")
	fs.StringVar(&o.SandboxdImage, "sandboxd-image", o.SandboxdImage,
		"Image holding sandboxd at /usr/local/bin/sandboxd (the sandbox image), from which an init container copies it into Pods whose pod template has the annotation paddock.dev/inject-sandboxd: \"true\" (bring your own image); empty refuses such Sandboxes.")
	fs.Func("image-config-registry-mirror", "Comma-separated REGISTRY=URL mappings, such as 127.0.0.1:5001=http://198.18.255.1:5001: the configs of images named REGISTRY/... (read for injected templates that name no command) are read from URL instead, with REGISTRY's pull credentials; for a registry the nodes reach at an address the controller's Pod cannot (paddock dev up sets it). Empty, the default, reads every image where it names.",
		func(s string) error {
			o.ImageConfigMirrors = imageconfig.Mirrors{}
			for _, part := range strings.Split(s, ",") {
				if part = strings.TrimSpace(part); part == "" {
					continue
				}
				reg, m, err := imageconfig.ParseMirror(part)
				if err != nil {
					return err
				}
				o.ImageConfigMirrors[reg] = m
			}
			return nil
		})
	fs.StringVar(&o.ImageConfigMirrorCredentials, "image-config-registry-mirror-credentials", o.ImageConfigMirrorCredentials,
		"Docker config file (a mounted kubernetes.io/dockerconfigjson Secret) whose credentials for a mirror's host the controller sends to that mirror of --image-config-registry-mirror, instead of the Pod's pull secrets. Every Sandbox creator can then have the controller read what any image there runs: only for a registry the nodes pull from without credentials (paddock dev up's).")
	fs.Var(labelsValue{&o.RouterPodLabels}, "router-pod-labels", "Labels of paddock-router Pods, as k=v[,k=v]; a template's default NetworkPolicy admits traffic from them.")
	fs.Var(labelsValue{&o.SandboxClientPodLabels}, "sandbox-client-pod-labels", "Labels, as k=v[,k=v], of the Pods of a sandbox's own namespace that a template's default NetworkPolicy admits besides the router and the controller; empty admits none (the upstream-unauthenticated-migration profile sets paddock.dev/sandbox-client=true).")
	fs.BoolVar(&o.SandboxdAllowUnauthenticatedNetwork, "sandboxd-allow-unauthenticated-network", o.SandboxdAllowUnauthenticatedNetwork,
		"UNSAFE: set "+sandboxd.AllowUnauthenticatedNetworkEnv+"=true on every sandbox, so sandboxd serves calls without a token from the pod network as upstream's does; only NetworkPolicy (--sandbox-client-pod-labels) then limits who can run commands in sandboxes. "+
			"For the upstream-unauthenticated-migration profile; needs --sandbox-credentials. New Pods only.")
	fs.StringVar(&o.SnapshotRepository, "snapshot-repository", o.SnapshotRepository,
		"Registry repository SandboxSnapshots are pushed under, as host[:port]/path (each gets <path>/<namespace>/<name>:<uid>); empty leaves snapshots Pending.")
	fs.StringVar(&o.SnapshotCaptureImage, "snapshot-capture-image", o.SnapshotCaptureImage,
		"Image of the privileged capture Pods SandboxSnapshots run on the source's node (paddock-snapshot); empty leaves snapshots Pending.")
	fs.StringVar(&o.SnapshotCaptureNamespace, "snapshot-capture-namespace", o.SnapshotCaptureNamespace,
		"Namespace of the privileged capture Pods; it must admit privileged Pods (pod-security.kubernetes.io/enforce: privileged). Empty means the controller's own namespace, which Paddock's install makes restricted.")
	fs.BoolVar(&o.SnapshotInsecureRegistry, "snapshot-insecure-registry", o.SnapshotInsecureRegistry, "Push snapshots over plain HTTP (a dev registry).")
	fs.StringVar(&o.SnapshotRunsc, "snapshot-runsc", o.SnapshotRunsc,
		"Absolute path of runsc on the nodes, mounted into capture Pods to export what gVisor Sandboxes wrote (runsc tar rootfs-upper); empty makes snapshots of gVisor Sandboxes fail, naming this flag.")
	fs.Func("snapshot-memory-max-size", fmt.Sprintf("Largest memory image (suspend: memory) of a Sandbox whose containers do not all have a memory limit, as a quantity such as 2Gi (default %s); with limits on every container the cap is their sum plus %s for gVisor's own state. A larger checkpoint fails and the Sandbox comes back cold.",
		resource.NewQuantity(sandbox.DefaultMemoryImageMaxBytes, resource.BinarySI), resource.NewQuantity(sandbox.MemoryImageOverhead, resource.BinarySI)),
		func(v string) error {
			q, err := resource.ParseQuantity(v)
			if err != nil || q.Sign() <= 0 {
				return fmt.Errorf("%q is not a positive quantity; use for example 2Gi or 512Mi", v)
			}
			o.SnapshotMemoryMaxBytes = q.Value()
			return nil
		})
	fs.DurationVar(&o.SnapshotMemoryCheckpointTimeout, "snapshot-memory-checkpoint-timeout", o.SnapshotMemoryCheckpointTimeout,
		"How long the node Pod that checkpoints a suspending Sandbox's memory may run (its activeDeadlineSeconds); a checkpoint that takes longer fails and the Sandbox comes back cold.")
	fs.DurationVar(&o.SnapshotMemoryRestoreTimeout, "snapshot-memory-restore-timeout", o.SnapshotMemoryRestoreTimeout,
		"How long a Pod restoring a Sandbox's memory may take to be Ready before it is replaced by a cold one (a restore the node refuses leaves the Pod in ContainerCreating).")
	fs.StringVar(&o.SnapshotContainerdSocket, "snapshot-containerd-socket", o.SnapshotContainerdSocket, "The nodes' containerd socket, as capture Pods see it; empty means /run/containerd/containerd.sock.")
	fs.Func("snapshot-node-paths", "Comma-separated node directories capture Pods mount at the same path (containerd's socket directory and root); empty means /run/containerd,/var/lib/containerd.",
		func(s string) error {
			o.SnapshotNodePaths = nil
			for _, p := range strings.Split(s, ",") {
				if p = strings.TrimSpace(p); p != "" {
					if !strings.HasPrefix(p, "/") {
						return fmt.Errorf("%q is not an absolute path", p)
					}
					o.SnapshotNodePaths = append(o.SnapshotNodePaths, p)
				}
			}
			return nil
		})
	fs.Var(labelsValue{&o.ControllerPodLabels}, "controller-pod-labels", "Labels of this controller's Pods, as k=v[,k=v]; a template's default NetworkPolicy admits traffic from them in the controller's namespace (claim settings and idle activity are asked of sandboxd).")
}

// Validate reports every invalid option at once, each naming its flag and what is accepted.
func (o *Options) Validate() error {
	var errs []error
	positive := []struct {
		flag  string
		value int
	}{
		{"kube-api-burst", o.KubeAPIBurst},
		{"sandbox-concurrent-workers", o.SandboxWorkers},
		{"sandbox-claim-concurrent-workers", o.SandboxClaimWorkers},
		{"sandbox-warm-pool-concurrent-workers", o.SandboxWarmPoolWorkers},
		{"sandbox-template-concurrent-workers", o.SandboxTemplateWorkers},
		{"sandbox-warm-pool-max-batch-size", o.WarmPoolMaxBatchSize},
	}
	if o.SnapshotRunsc != "" && !strings.HasPrefix(o.SnapshotRunsc, "/") {
		errs = append(errs, fmt.Errorf("--snapshot-runsc=%s: must be the absolute path of runsc on the nodes", o.SnapshotRunsc))
	}
	for _, p := range positive {
		if p.value <= 0 {
			errs = append(errs, fmt.Errorf("--%s=%d: must be greater than 0", p.flag, p.value))
		}
	}
	if math.IsNaN(o.KubeAPIQPS) || math.IsInf(o.KubeAPIQPS, 0) {
		errs = append(errs, fmt.Errorf("--kube-api-qps=%v: must be a finite number (negative disables the limiter)", o.KubeAPIQPS))
	}
	if r := o.WarmPoolMaxRefillRate; math.IsNaN(r) || math.IsInf(r, 0) || r < 0 {
		errs = append(errs, fmt.Errorf("--sandbox-warm-pool-max-refill-rate=%v: must be a finite number, 0 or more (0 means no limit)", r))
	}
	if o.SandboxStatusCoalesceWindow < 0 {
		errs = append(errs, fmt.Errorf("--sandbox-status-coalesce-window=%s: must not be negative (0 writes every status change at once)", o.SandboxStatusCoalesceWindow))
	}
	if o.SandboxWriteBehindWindow < 0 {
		errs = append(errs, fmt.Errorf("--sandbox-write-behind-window=%s: must not be negative; use 0 to turn write-behind off or a duration such as 200ms (capped at 1s)", o.SandboxWriteBehindWindow))
	}
	if o.WarmPoolReplenishDelay < 0 {
		errs = append(errs, fmt.Errorf("--sandbox-warm-pool-replenish-delay=%s: must not be negative", o.WarmPoolReplenishDelay))
	}
	if o.WarmPoolMaxStarting < 0 {
		errs = append(errs, fmt.Errorf("--sandbox-warm-pool-max-starting=%d: must be 0 (no limit) or more", o.WarmPoolMaxStarting))
	}
	for flagName, d := range map[string]time.Duration{
		"sandbox-warm-pool-readiness-grace-period":         o.WarmPoolReadinessGracePeriod,
		"sandbox-claim-resize-give-up":                     o.SandboxClaimResizeGiveUp,
		"sandbox-warm-pool-unschedulable-recheck-interval": o.WarmPoolUnschedulableRecheckInterval,
		"snapshot-memory-checkpoint-timeout":               o.SnapshotMemoryCheckpointTimeout,
		"snapshot-memory-restore-timeout":                  o.SnapshotMemoryRestoreTimeout,
	} {
		if d <= 0 {
			errs = append(errs, fmt.Errorf("--%s=%s: must be greater than 0", flagName, d))
		}
	}
	for flagName, addr := range map[string]string{
		"metrics-bind-address":      o.MetricsBindAddress,
		"health-probe-bind-address": o.HealthProbeBindAddress,
	} {
		if addr == "0" || (flagName == "metrics-bind-address" && addr == "") {
			continue
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			errs = append(errs, fmt.Errorf("--%s=%q: want host:port or :port (%v)", flagName, addr, err))
		}
	}
	if o.ImageConfigMirrorCredentials != "" {
		data, err := os.ReadFile(o.ImageConfigMirrorCredentials)
		if err == nil && len(o.ImageConfigMirrors) == 0 {
			err = errors.New("it needs --image-config-registry-mirror")
		}
		if err == nil {
			err = o.ImageConfigMirrors.WithCredentials(data)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("--image-config-registry-mirror-credentials=%s: %w (want a docker config JSON such as a kubernetes.io/dockerconfigjson Secret's .dockerconfigjson)", o.ImageConfigMirrorCredentials, err))
		}
	}
	if _, err := o.credentialsSecretKey(); err != nil {
		errs = append(errs, err)
	}
	if o.ClusterDomain == "" {
		errs = append(errs, errors.New("--cluster-domain: must not be empty (the usual value is cluster.local)"))
	}
	if o.SandboxdAllowUnauthenticatedNetwork && !o.SandboxCredentials {
		errs = append(errs, errors.New("--sandboxd-allow-unauthenticated-network needs --sandbox-credentials: without a token sandboxd serves nobody unless it runs --allow-unauthenticated itself; drop one of the two"))
	}
	if o.ClaimObservabilityAnnotations && o.DisableClaimObservabilityAnnotations {
		errs = append(errs, errors.New("--claim-observability-annotations and --disable-claim-observability-annotations: choose one (the annotations are off by default; drop --disable-claim-observability-annotations to write them)"))
	}
	if o.LeaderElect && o.LeaderElectionID == "" {
		errs = append(errs, errors.New("--leader-election-id: must not be empty when --leader-elect is true"))
	}
	return errors.Join(errs...)
}
