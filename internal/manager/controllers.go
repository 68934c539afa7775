package manager

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/paddock-dev/paddock/api/sandboxd"
	"github.com/paddock-dev/paddock/internal/blueprint"
	"github.com/paddock-dev/paddock/internal/controller/idle"
	"github.com/paddock-dev/paddock/internal/controller/indexes"
	"github.com/paddock-dev/paddock/internal/controller/sandbox"
	"github.com/paddock-dev/paddock/internal/controller/sandboxclaim"
	"github.com/paddock-dev/paddock/internal/controller/sandboxsnapshot"
	"github.com/paddock-dev/paddock/internal/controller/sandboxtemplate"
	"github.com/paddock-dev/paddock/internal/controller/sandboxwarmpool"
	"github.com/paddock-dev/paddock/internal/imageconfig"
	"github.com/paddock-dev/paddock/internal/sandboxdclient"
	"github.com/paddock-dev/paddock/internal/version"
)

// SetupControllers registers the cache indexes and the controllers o enables; tp traces the
// Sandbox controller's passes.
func SetupControllers(ctx context.Context, mgr ctrl.Manager, o *Options, tp trace.TracerProvider) error {
	// Set once before any controller runs: warm members, cold sandboxes and template hashes
	// must all see the same DNS configuration.
	blueprint.PublicNameservers = append([]string(nil), o.SandboxNameservers...)
	if err := indexes.RegisterFor(ctx, mgr.GetFieldIndexer(), o.Extensions); err != nil {
		return err
	}
	var key []byte
	if o.SandboxCredentials {
		secret, err := o.credentialsSecretKey()
		if err != nil {
			return err
		}
		if key, err = EnsureCredentialsKey(ctx, mgr.GetAPIReader(), mgr.GetClient(), secret); err != nil {
			return err
		}
	}
	if err := setupSandbox(mgr, o, tp, key); err != nil {
		return err
	}
	if o.IdleController {
		r := idle.New(mgr.GetClient(), mgr.GetEventRecorder(idle.ControllerName),
			idle.WithActivitySource(sandboxdclient.New(sandboxdclient.Options{Key: key})), idle.WithExtensions(o.Extensions))
		if err := r.SetupWithManager(mgr); err != nil {
			return fmt.Errorf("setting up the idle controller: %w", err)
		}
	}
	if !o.Extensions {
		return nil
	}
	return setupExtensions(mgr, o, tp, key)
}

// RegisterMetrics registers Paddock's own metrics next to controller-runtime's; reader (the
// manager's cached client) serves the gauges computed at scrape time. The warm pool gauges need
// the extensions: without them the cache must not watch SandboxWarmPools. Call it once per
// process.
func RegisterMetrics(reg prometheus.Registerer, reader client.Reader, o *Options) error {
	errs := []error{
		reg.Register(version.NewCollector()),
		sandbox.RegisterMetrics(reg, reader),
		sandboxclaim.RegisterMetrics(reg),
		idle.RegisterMetrics(reg),
	}
	if o.Extensions {
		errs = append(errs, sandboxwarmpool.RegisterMetrics(reg, reader))
	}
	return errors.Join(errs...)
}

// tracerOrNil returns nil for a no-op provider, so that controllers skip tracing entirely when
// it is off.
func tracerOrNil(tp trace.TracerProvider) trace.TracerProvider {
	if _, off := tp.(noop.TracerProvider); off || tp == nil {
		return nil
	}
	return tp
}

// setupSandbox registers the Sandbox controller; key (nil: credentials off) derives the tokens.
func setupSandbox(mgr ctrl.Manager, o *Options, tp trace.TracerProvider, key []byte) error {
	opts := sandboxOptions(o)
	opts.APIReader = mgr.GetAPIReader()
	opts.CredentialsKey = key
	opts.TracerProvider = tp
	// paddock-egress keeps the installation's CA beside the controller (its --ca-secret default).
	opts.EgressCASecret = types.NamespacedName{Namespace: ownNamespace(), Name: sandbox.EgressCAName}
	r, err := sandbox.New(mgr.GetClient(), mgr.GetEventRecorder(sandbox.ControllerName), opts)
	if err != nil {
		return err
	}
	if err := r.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the Sandbox controller: %w", err)
	}
	return nil
}

func setupExtensions(mgr ctrl.Manager, o *Options, tp trace.TracerProvider, key []byte) error {
	templateOpts := templateOptions(o)
	templateOpts.APIReader = mgr.GetAPIReader()
	template, err := sandboxtemplate.New(mgr.GetClient(), mgr.GetEventRecorder(sandboxtemplate.ControllerName), templateOpts)
	if err != nil {
		return err
	}
	pool, err := sandboxwarmpool.New(mgr.GetClient(), mgr.GetEventRecorder(sandboxwarmpool.ControllerName), poolOptions(o))
	if err != nil {
		return err
	}

	domains, err := sandboxclaim.LoadAllowedLabelDomains(o.AllowedLabelDomainsFile)
	if err != nil {
		return fmt.Errorf("--allowed-label-domains-file: %w", err)
	}
	var claimEvents events.EventRecorder
	if !o.DisableClaimEvents {
		claimEvents = mgr.GetEventRecorder(sandboxclaim.ControllerName)
	}
	claimOpts := claimOptions(o)
	claimOpts.APIReader = mgr.GetAPIReader()
	claimOpts.AllowedLabelDomains = domains
	claimOpts.TracerProvider = tracerOrNil(tp)
	claimOpts.CredentialsKey = key
	claim, err := sandboxclaim.New(mgr.GetClient(), claimEvents, claimOpts)
	if err != nil {
		return err
	}
	snapOpts := snapshotOptions(o)
	snapOpts.APIReader = mgr.GetAPIReader()
	snap, err := sandboxsnapshot.New(mgr.GetClient(), mgr.GetEventRecorder(sandboxsnapshot.ControllerName), snapOpts)
	if err != nil {
		return err
	}
	for name, setup := range map[string]interface{ SetupWithManager(ctrl.Manager) error }{
		"SandboxTemplate": template, "SandboxWarmPool": pool, "SandboxClaim": claim, "SandboxSnapshot": snap,
	} {
		if err := setup.SetupWithManager(mgr); err != nil {
			return fmt.Errorf("setting up the %s controller: %w", name, err)
		}
	}
	return nil
}

// sandboxOptions is what the flags in o give the Sandbox controller.
func sandboxOptions(o *Options) sandbox.Options {
	opts := sandbox.DefaultOptions()
	opts.ClusterDomain = o.ClusterDomain
	opts.Workers = o.SandboxWorkers
	opts.StatusCoalesceWindow = o.SandboxStatusCoalesceWindow
	opts.WriteBehindWindow = o.SandboxWriteBehindWindow
	if o.SandboxdAllowUnauthenticatedNetwork {
		opts.SandboxdEnv = []corev1.EnvVar{{Name: sandboxd.AllowUnauthenticatedNetworkEnv, Value: "true"}}
	}
	opts.SandboxdImage = o.SandboxdImage
	opts.ImageConfigs = imageconfig.NewReader(imageconfig.Options{Mirrors: o.ImageConfigMirrors, LastsAfter: o.ImageConfigLastsAfter})
	// The SandboxSnapshot CRD comes with the extensions.
	opts.SuspendCaptures = o.Extensions
	if o.Extensions && (o.SnapshotRepository == "" || o.SnapshotCaptureImage == "") {
		opts.SuspendCapturesUnavailable = "snapshots are not configured on this cluster (start the controller with --snapshot-repository and --snapshot-capture-image, docs/design/snapshots.md)"
	}
	// The suspend that keeps memory runs its node Pods where capture Pods run, with their image.
	if o.SnapshotCaptureImage != "" {
		opts.Memory = sandbox.MemoryOptions{Namespace: cmp.Or(o.SnapshotCaptureNamespace, ownNamespace()), Image: o.SnapshotCaptureImage, Runsc: o.SnapshotRunsc,
			DefaultMaxBytes: o.SnapshotMemoryMaxBytes, CheckpointTimeout: o.SnapshotMemoryCheckpointTimeout, RestoreTimeout: o.SnapshotMemoryRestoreTimeout}
	}
	return opts
}

// templateOptions, poolOptions and claimOptions are what the flags in o give each extension
// controller.
func templateOptions(o *Options) sandboxtemplate.Options {
	return sandboxtemplate.Options{
		Workers:         o.SandboxTemplateWorkers,
		RouterNamespace: o.RouterNamespace,
		RouterPodLabels: o.RouterPodLabels,
		// The controller's own Pods: the namespace it runs in.
		ControllerNamespace: ownNamespace(),
		ControllerPodLabels: o.ControllerPodLabels,
		ClientPodLabels:     o.SandboxClientPodLabels,
		EgressDenyCIDRs:     o.SandboxEgressDenyCIDRs,
		EgressDiscovery:     o.SandboxEgressDiscovery,
		EgressProxyPorts:    o.SandboxEgressProxyPorts,
	}
}

func poolOptions(o *Options) sandboxwarmpool.Options {
	opts := sandboxwarmpool.DefaultOptions()
	opts.Workers = o.SandboxWarmPoolWorkers
	opts.MaxBatchSize = o.WarmPoolMaxBatchSize
	opts.ReadinessGracePeriod = o.WarmPoolReadinessGracePeriod
	opts.UnschedulableRecheckInterval = o.WarmPoolUnschedulableRecheckInterval
	opts.SafeToEvict = o.EnableWarmPoolEviction
	opts.ReplenishDelay = o.WarmPoolReplenishDelay
	opts.MaxRefillRate = o.WarmPoolMaxRefillRate
	opts.MaxStarting = o.WarmPoolMaxStarting
	return opts
}

// claimOptions leaves out what setupExtensions adds: the label domains read from their file and
// the tracer.
func claimOptions(o *Options) sandboxclaim.Options {
	return sandboxclaim.Options{
		Workers:           o.SandboxClaimWorkers,
		ResizeGiveUpAfter: o.SandboxClaimResizeGiveUp,
		// --disable-claim-observability-annotations needs nothing: off is the default, and
		// Validate refuses it together with --claim-observability-annotations.
		ObservabilityAnnotations: o.ClaimObservabilityAnnotations,
	}
}

// snapshotOptions is what the flags in o give the SandboxSnapshot controller; capture Pods run
// in --snapshot-capture-namespace, else in the controller's own namespace.
func snapshotOptions(o *Options) sandboxsnapshot.Options {
	return sandboxsnapshot.Options{
		Namespace:        cmp.Or(o.SnapshotCaptureNamespace, ownNamespace()),
		Repository:       o.SnapshotRepository,
		CaptureImage:     o.SnapshotCaptureImage,
		InsecureRegistry: o.SnapshotInsecureRegistry,
		ContainerdSocket: o.SnapshotContainerdSocket,
		NodePaths:        o.SnapshotNodePaths,
		Runsc:            o.SnapshotRunsc,
	}
}
