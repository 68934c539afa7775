package manager

import (
	"fmt"
	"net/http"
	"net/http/pprof"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/paddock-dev/paddock/internal/controller/sandbox"
)

// RESTConfig applies the client-side rate limits of o to cfg. A negative QPS turns the limiter
// off, which is what a controller co-located with its API server wants under load.
func RESTConfig(cfg *rest.Config, o *Options) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS = float32(o.KubeAPIQPS)
	cfg.Burst = o.KubeAPIBurst
	cfg.UserAgent = "paddock-controller"
	return cfg
}

// NewManager builds the controller-runtime manager: cache, metrics and health endpoints, and
// leader election. Controllers are added by SetupControllers.
func NewManager(cfg *rest.Config, scheme *runtime.Scheme, o *Options) (ctrl.Manager, error) {
	metrics := metricsserver.Options{BindAddress: o.MetricsBindAddress}
	if o.MetricsSecure {
		// A self-signed serving certificate; the filter reviews the caller's token and checks
		// get on the path, for pprof too.
		metrics.SecureServing = true
		metrics.FilterProvider = filters.WithAuthenticationAndAuthorization
	}
	if o.EnablePprof {
		metrics.ExtraHandlers = map[string]http.Handler{
			"/debug/pprof/":        http.HandlerFunc(pprof.Index),
			"/debug/pprof/profile": http.HandlerFunc(pprof.Profile),
			"/debug/pprof/trace":   http.HandlerFunc(pprof.Trace),
		}
	}
	cacheOpts := sandbox.CacheOptions()
	if o.CacheLabelSelectors {
		cacheOpts = sandbox.LabelScopedCacheOptions()
	}
	mgr, err := ctrl.NewManager(RESTConfig(cfg, o), ctrl.Options{
		Scheme:                        scheme,
		Metrics:                       metrics,
		HealthProbeBindAddress:        o.HealthProbeBindAddress,
		LeaderElection:                o.LeaderElect,
		LeaderElectionID:              o.LeaderElectionID,
		LeaderElectionNamespace:       o.LeaderElectionNamespace,
		LeaderElectionReleaseOnCancel: true,
		Controller:                    config.Controller{SkipNameValidation: &o.AllowDuplicateControllers},
		// Cached objects lose managedFields, and Pods keep only what the controllers read.
		Cache: cacheOpts,
	})
	if err != nil {
		return nil, fmt.Errorf("creating the controller manager: %w", err)
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return nil, fmt.Errorf("adding /healthz: %w", err)
	}
	// Ready once the caches have synced, so a rolling update waits for a replica that can work.
	if err := mgr.AddReadyzCheck("informers", func(req *http.Request) error {
		if !mgr.GetCache().WaitForCacheSync(req.Context()) {
			return fmt.Errorf("informer caches have not synced")
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("adding /readyz: %w", err)
	}
	return mgr, nil
}
