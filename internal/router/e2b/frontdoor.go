package e2b

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	e2bapi "github.com/paddock-dev/paddock/api/e2b"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	snapshotsv1alpha1 "github.com/paddock-dev/paddock/api/snapshots/v1alpha1"
	"github.com/paddock-dev/paddock/internal/controller/indexes"
	"github.com/paddock-dev/paddock/internal/router/headers"
	"github.com/paddock-dev/paddock/internal/router/proxy"
	"github.com/paddock-dev/paddock/internal/router/wake"
)

// Config is what the front door needs. Every field is required unless marked optional.
type Config struct {
	// Kube is the API server connection.
	Kube *rest.Config
	// Domain is returned as each sandbox's domain, so the SDK builds {port}-{id}.{Domain} hosts;
	// it is also the domain TargetFromHost accepts.
	Domain string
	// KeysNamespace holds the API-key Secrets.
	KeysNamespace string
	// Tokens derives each sandbox's token from the cluster's credentials key (the router's
	// sandboxtoken.Source, which watches the key Secret).
	Tokens Tokens
	// CreateTimeout bounds create and connect: the wait for a bound, Ready sandbox whose daemon
	// accepts requests.
	CreateTimeout time.Duration
	// Policy is the router's address policy for dialling sandboxes.
	Policy headers.Policy
	// Transport dials sandboxes, for the daemon probe and the data plane.
	Transport http.RoundTripper
	// DaemonPort is the container port the E2B port 49983 maps to; 0 means 49983. Only tests
	// change it; no flag sets it.
	DaemonPort int
	Log        logr.Logger
	// Activity learns of every data-plane request forwarded to a sandbox, for the idle
	// controller (the router's activity reporter); optional.
	Activity *wake.Reporter
	// Waker resumes a sandbox the idle controller paused with autoResume when a data-plane
	// request or connect arrives (the router's Waker); optional: without it traffic wakes nothing.
	Waker *wake.Waker
	// Registry receives the front door's metrics; optional.
	Registry prometheus.Registerer
	// Now is the clock; optional.
	Now func() time.Time
}

// The front door's API client budget.
const (
	kubeQPS   = 200
	kubeBurst = 400
)

// FrontDoor serves E2B's control plane and data plane.
type FrontDoor struct {
	cfg     Config
	client  client.Client // uncached: writes, and reads that must see the caller's last write
	cache   cache.Cache   // API keys, front-door claims and Sandboxes: lists, waits and routing
	waits   *notifier
	proxy   http.Handler
	control http.Handler
	stats   *frontDoorMetrics
	// noSnapshots says why the snapshot and fork calls are not served ("" when they are): the
	// cluster lacks the SandboxSnapshot CRD (chart upgrades do not add CRDs).
	noSnapshots string
}

// New builds the front door; Start runs its cache.
func New(cfg Config) (*FrontDoor, error) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.DaemonPort == 0 {
		cfg.DaemonPort = e2bapi.EnvdPort
	}
	scheme := k8sruntime.NewScheme()
	for _, add := range []func(*k8sruntime.Scheme) error{clientgoscheme.AddToScheme, agentsv1beta1.AddToScheme, extensionsv1beta1.AddToScheme, snapshotsv1alpha1.AddToScheme} {
		if err := add(scheme); err != nil {
			return nil, fmt.Errorf("building the E2B front door's scheme: %w", err)
		}
	}
	// client-go's default of 5 requests per second would queue a burst of creates behind its rate
	// limiter: every create is a write and a few reads, so the front door gets its own budget.
	kube := rest.CopyConfig(cfg.Kube)
	if kube.QPS >= 0 { // negative turns the limiter off; keep that
		kube.QPS, kube.Burst = max(kube.QPS, kubeQPS), max(kube.Burst, kubeBurst)
	}
	c, err := client.New(kube, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("creating the E2B front door's client: %w", err)
	}
	hasKeyLabel, err := labels.NewRequirement(e2bapi.APIKeyNamespaceLabel, selection.Exists, nil)
	if err != nil {
		return nil, err
	}
	noSnapshots, err := snapshotsMissing(c.RESTMapper())
	if err != nil {
		return nil, err
	}
	byObject := map[client.Object]cache.ByObject{
		&corev1.Secret{}: {Namespaces: map[string]cache.Config{
			cfg.KeysNamespace: {LabelSelector: labels.NewSelector().Add(*hasKeyLabel)}}},
		&extensionsv1beta1.SandboxClaim{}:    {Label: labels.SelectorFromSet(labels.Set{e2bapi.SandboxLabel: "true"}), Transform: dropManagedFields},
		&agentsv1beta1.Sandbox{}:             {Transform: dropManagedFields},
		&extensionsv1beta1.SandboxTemplate{}: {Transform: dropManagedFields},
	}
	if noSnapshots == "" {
		// Only the snapshots the front door made: the ones it lists and waits for.
		byObject[&snapshotsv1alpha1.SandboxSnapshot{}] = cache.ByObject{Label: labels.SelectorFromSet(labels.Set{e2bapi.SnapshotLabel: "true"}), Transform: dropManagedFields}
	}
	ca, err := cache.New(cfg.Kube, cache.Options{Scheme: scheme, ByObject: byObject})
	if err != nil {
		return nil, fmt.Errorf("creating the E2B front door's cache: %w", err)
	}
	f := &FrontDoor{cfg: cfg, client: c, cache: ca, waits: newNotifier(), noSnapshots: noSnapshots}
	if noSnapshots != "" {
		cfg.Log.Info("E2B snapshot and fork calls are not served", "reason", noSnapshots)
	}
	if err := f.registerInformers(context.Background()); err != nil {
		return nil, err
	}
	f.stats = newMetrics(cfg.Registry)
	f.proxy = newDataProxy(f)
	f.control = f.stats.instrument(f.routes())
	return f, nil
}

func dropManagedFields(obj any) (any, error) {
	if o, ok := obj.(client.Object); ok {
		o.SetManagedFields(nil)
	}
	return obj, nil
}

// registerInformers adds the indexes and the event handlers that wake waiting creates, snapshots
// and forks (keys and pools wake none; their informers start here so that the cache serves them
// at once).
func (f *FrontDoor) registerInformers(ctx context.Context) error {
	if err := f.cache.IndexField(ctx, &extensionsv1beta1.SandboxClaim{}, e2bapi.ClaimNameIndex, func(o client.Object) []string {
		return []string{o.GetName()}
	}); err != nil {
		return fmt.Errorf("indexing SandboxClaims by name: %w", err)
	}
	if err := f.cache.IndexField(ctx, &agentsv1beta1.Sandbox{}, agentsv1beta1.SandboxClaimUIDIndex, indexes.SandboxByClaimUID); err != nil {
		return fmt.Errorf("indexing Sandboxes by claim UID: %w", err)
	}
	watched := []client.Object{&extensionsv1beta1.SandboxClaim{}, &agentsv1beta1.Sandbox{}, &corev1.Secret{}, &extensionsv1beta1.SandboxWarmPool{}, &extensionsv1beta1.SandboxTemplate{}}
	if f.noSnapshots == "" {
		watched = append(watched, &snapshotsv1alpha1.SandboxSnapshot{})
	}
	for _, obj := range watched {
		inf, err := f.cache.GetInformer(ctx, obj, cache.BlockUntilSynced(false))
		if err != nil {
			return fmt.Errorf("creating the %T informer: %w", obj, err)
		}
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc:    func(o any) { f.waits.wake(o) },
			UpdateFunc: func(_, o any) { f.waits.wake(o) },
			DeleteFunc: func(o any) { f.waits.wake(o) },
		}); err != nil {
			return fmt.Errorf("watching %T: %w", obj, err)
		}
	}
	return nil
}

// snapshotsMissing says why the cluster cannot serve SandboxSnapshots, "" when it can.
func snapshotsMissing(mapper meta.RESTMapper) (string, error) {
	gvk := snapshotsv1alpha1.GroupVersion.WithKind("SandboxSnapshot")
	_, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	switch {
	case meta.IsNoMatchError(err):
		return fmt.Sprintf("the cluster has no %s CRD (%s); install it from Paddock's CRDs (helm upgrade does not add CRDs: kubectl apply --server-side -f charts/paddock/crds/) and restart the router", gvk.Kind, gvk.GroupVersion()), nil
	case err != nil:
		return "", fmt.Errorf("looking up the SandboxSnapshot API: %w", err)
	}
	return "", nil
}

// Start runs the cache until ctx ends.
func (f *FrontDoor) Start(ctx context.Context) error { return f.cache.Start(ctx) }

// WaitForSync blocks until the cache has synced or ctx ends, and reports which.
func (f *FrontDoor) WaitForSync(ctx context.Context) bool { return f.cache.WaitForCacheSync(ctx) }

// ServeHTTP routes data-plane requests (E2b-Sandbox-Id header, or a {port}-{id}.{domain} Host) to
// sandboxes and everything else to the control plane.
func (f *FrontDoor) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get(e2bapi.SandboxIDHeader) != "" {
		f.proxy.ServeHTTP(w, r)
		return
	}
	if _, ok := e2bapi.TargetFromHost(r.Host, f.cfg.Domain); ok {
		f.proxy.ServeHTTP(w, r)
		return
	}
	f.control.ServeHTTP(w, r)
}

// Tokens gives sandbox tokens (proxy.Credentials) and says when it cannot give any.
type Tokens interface {
	proxy.Credentials
	// KeyErr is nil when the credentials key is known, else a client-facing reason it is not.
	KeyErr() error
}
