package bench

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
)

// Options is the harness's command line: which scenarios to run and where to write the results.
type Options struct {
	Kubeconfig   string
	PoolSize     int
	Count        int
	Rates        string
	Cold         int
	Timeout      time.Duration
	RefillWindow time.Duration
	Image        string
	KWOK         bool
	Out          string
	Note         string
	// Hold is the number of Sandboxes of the hold scenario (0 skips it); HoldTimeout bounds
	// their creation, the wait for the controller to settle, and the resync after the restart.
	Hold        int
	HoldTimeout time.Duration
	Controller  Controller
	// RuntimeRequests is the number of round trips of the runtime scenario (0 skips it);
	// RuntimeLoad and RuntimeConcurrency shape its throughput measurement.
	RuntimeRequests    int
	RuntimeLoad        int
	RuntimeConcurrency int
	Runtime            RuntimeTarget
	// E2BCreates is the number of E2B creates of each e2b scenario (0 skips them), one scenario
	// per rate of E2BRates, against the front door of E2B.
	E2BCreates int
	E2BRates   string
	// E2BPool is the e2b scenarios' pool size; 0 makes it E2BCreates, so that no create waits for
	// the refill. Smaller, the creates run while the pool refills.
	E2BPool int
	// E2BIdleCPU is a comma-separated list of paddock.dev/idle-cpu values for the e2b pool, one
	// scenario per value and rate; an empty value leaves the annotation off (members wait and
	// start with the template's CPU request).
	E2BIdleCPU string
	E2B        E2BTarget
	// Compare is two controller images; every scenario runs once with each.
	Compare string
	// From re-renders the report.json of an earlier run instead of running anything.
	From string
	// Doc is a Markdown document whose generated results section is rewritten from the report.
	Doc string
	// Command is the command line, recorded in the report; not a flag.
	Command string
}

// NewOptions returns small defaults: a run that finishes in seconds on a shared machine.
func NewOptions() *Options {
	return &Options{
		PoolSize:           20,
		Count:              40,
		Rates:              "5,20",
		Timeout:            2 * time.Minute,
		RefillWindow:       30 * time.Second,
		Image:              DefaultImage,
		Out:                "bench-out",
		HoldTimeout:        15 * time.Minute,
		RuntimeLoad:        20000,
		RuntimeConcurrency: 32,
		Runtime:            DefaultRuntimeTarget(),
		E2BRates:           "5,20",
		E2B:                DefaultE2BTarget(),
		Controller: Controller{
			Namespace: "paddock-system", Selector: "app.kubernetes.io/name=paddock-controller", MetricsPort: 8080,
			Deployment: "paddock-controller",
		},
	}
}

// AddFlags registers the options on fs.
func (o *Options) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "kubeconfig of the cluster to measure (default: $KUBECONFIG or ~/.kube/config)")
	fs.IntVar(&o.PoolSize, "pool", o.PoolSize, "warm pool replicas of each warm scenario")
	fs.IntVar(&o.Count, "count", o.Count, "claims created in each warm scenario")
	fs.StringVar(&o.Rates, "rate", o.Rates, `comma-separated claim rates per second, one warm scenario each; "burst" or 0 creates all claims at once; empty runs no warm scenario`)
	fs.IntVar(&o.Cold, "cold", o.Cold, "Sandboxes created at once in a cold scenario; 0 skips it")
	fs.DurationVar(&o.Timeout, "timeout", o.Timeout, "bound on filling the pool and, separately, on every object becoming Ready, per scenario")
	fs.DurationVar(&o.RefillWindow, "refill-window", o.RefillWindow, "bound on waiting for the pool to refill after a warm scenario (writes are counted until it is full)")
	fs.IntVar(&o.Hold, "hold", o.Hold, "Sandboxes created and held in a hold scenario (controller memory and CPU, then a restart and its resync time); 0 skips it")
	fs.DurationVar(&o.HoldTimeout, "hold-timeout", o.HoldTimeout, "bound on each phase of the hold scenario: creating the Sandboxes, the controller settling, the resync after its restart")
	fs.StringVar(&o.Controller.Namespace, "controller-namespace", o.Controller.Namespace, "namespace of the controller's Pods (hold scenario)")
	fs.StringVar(&o.Controller.Selector, "controller-selector", o.Controller.Selector, "label selector of the controller's Pods (hold scenario)")
	fs.IntVar(&o.Controller.MetricsPort, "controller-metrics-port", o.Controller.MetricsPort, "port of the controller's HTTPS Prometheus /metrics, read from the Pod's address with the kubeconfig's token (hold scenario)")
	fs.StringVar(&o.Controller.Deployment, "controller-deployment", o.Controller.Deployment, "the controller's Deployment in --controller-namespace, whose first container's image --compare swaps")
	fs.StringVar(&o.Compare, "compare", o.Compare, "IMAGE_A,IMAGE_B: run every scenario with the controller Deployment on image A, then on image B, on the same cluster; write a/, b/ and compare.md (ratios B/A) into --out, then restore the original image")
	fs.IntVar(&o.RuntimeRequests, "runtime", o.RuntimeRequests, "round trips of a runtime scenario, each way: exec of \"true\" through the SDK and GET /v1/health, straight to one real sandbox and through the router; 0 skips it. The harness must reach Pod IPs (run it on the cluster's node)")
	fs.IntVar(&o.RuntimeLoad, "runtime-load", o.RuntimeLoad, "requests of the runtime scenario's throughput measurement, each way (direct and routed); 0 skips it")
	fs.IntVar(&o.RuntimeConcurrency, "runtime-concurrency", o.RuntimeConcurrency, "concurrent clients of the runtime scenario's throughput measurement")
	fs.StringVar(&o.Runtime.Image, "runtime-image", o.Runtime.Image, "image of the runtime scenario's sandbox; it must run sandboxd (REST on 8080, legacy runtime API on 8888) and be pullable by a real node")
	fs.StringVar(&o.Runtime.Router.Namespace, "router-namespace", o.Runtime.Router.Namespace, "namespace of paddock-router's Pods (runtime scenario)")
	fs.StringVar(&o.Runtime.Router.Selector, "router-selector", o.Runtime.Router.Selector, "label selector of paddock-router's Pods (runtime scenario); empty measures no router")
	fs.IntVar(&o.Runtime.Router.Port, "router-port", o.Runtime.Router.Port, "paddock-router's plain-HTTP proxy port on its Pods (runtime scenario)")
	fs.IntVar(&o.E2BCreates, "e2b", o.E2BCreates, "E2B creates of each e2b scenario, through paddock-router's E2B front door with E2B's wire protocol, each followed by commands.run('true'), against a pool of as many members; 0 skips it. The harness must reach Pod IPs (run it on the cluster's node)")
	fs.StringVar(&o.E2BRates, "e2b-rate", o.E2BRates, "comma-separated E2B create rates per second, one e2b scenario each; \"burst\" or 0 creates all at once")
	fs.IntVar(&o.E2BPool, "e2b-pool", o.E2BPool, "members of each e2b scenario's pool; 0 makes it --e2b (every create served by a member made before the creates); fewer measures the creates while the pool refills")
	fs.StringVar(&o.E2BIdleCPU, "e2b-idle-cpu", o.E2BIdleCPU, "comma-separated paddock.dev/idle-cpu values for the e2b pool, one scenario per value and rate, such as ',10m' (without, then 10m): members start and wait with that CPU request, so a weight that low in their cgroup, and are resized in place when claimed; needs a node with pod-level cgroups")
	fs.StringVar(&o.E2B.APIURL, "e2b-api-url", o.E2B.APIURL, "the E2B front door (E2B_API_URL and E2B_SANDBOX_URL); empty uses a Ready paddock-router Pod of --router-namespace on port 3000")
	fs.StringVar(&o.E2B.APIKey, "e2b-api-key", o.E2B.APIKey, "an E2B API key to use (with --e2b-namespace, the namespace it is bound to); empty creates one per scenario in --e2b-api-key-namespace and deletes it afterwards")
	fs.StringVar(&o.E2B.Namespace, "e2b-namespace", o.E2B.Namespace, "the namespace --e2b-api-key is bound to; the e2b scenarios make their template and pool there instead of in a namespace of their own")
	fs.StringVar(&o.E2B.KeysNamespace, "e2b-api-key-namespace", o.E2B.KeysNamespace, "the router's --e2b-api-key-namespace, where the scenario creates its API key Secret")
	fs.StringVar(&o.E2B.Template, "e2b-template", o.E2B.Template, "namespace/name of the SandboxTemplate the e2b pool copies (volumes dropped); it must run sandboxd with envd's port 49983 declared and /bin/bash")
	fs.BoolVar(&o.E2B.ExistingPool, "e2b-existing-pool", o.E2B.ExistingPool, "send the creates to --e2b-template itself, served by its own pool as a user's creates are (such as default/base of paddock dev up, which sizes itself), instead of a copy with a pool the harness makes and fills; the harness makes an API key bound to the template's namespace")
	fs.BoolVar(&o.E2B.SecondCommand, "e2b-second-command", o.E2B.SecondCommand, "after each create's first commands.run('true'), run a second one and report it apart: the first command's cost over the second is what a cold member adds (binary and libraries not yet read, connection not yet open)")
	fs.BoolVar(&o.E2B.KillAfterCommand, "e2b-kill-after-command", o.E2B.KillAfterCommand, "kill each E2B sandbox once its command ran, as an agent that is done does, so that a long stream holds only the sandboxes in flight (a node holds at most the kubelet's maxPods, 110 by default); without it every sandbox lives until the scenario ends")
	fs.BoolVar(&o.E2B.NodeCPU, "e2b-node-cpu", o.E2B.NodeCPU, "the harness runs on the cluster's only node (paddock dev up's): read /proc when the creates start and when the last first command is done, and report where the node's CPU went, per create, by component (sandbox members, kube-apiserver, etcd, Paddock's Pods, kubelet, containerd, shims and runsc, network policy)")
	fs.Float64Var(&o.E2B.SettleLoad, "e2b-settle-load", o.E2B.SettleLoad, "after the pool is full, wait (at most --timeout) until this machine's 1-minute load average is at most this before the creates; 0 does not wait. On a small node the pool's members starting and the previous scenario's teardown otherwise share the measured window")
	fs.StringVar(&o.Image, "image", o.Image, "container image of the sandboxes")
	fs.BoolVar(&o.KWOK, "kwok", o.KWOK, "place the sandboxes on KWOK fake nodes (node label type=kwok, taint kwok.x-k8s.io/node=fake:NoSchedule)")
	fs.StringVar(&o.Out, "out", o.Out, "directory for report.json, report.md and the latency plots")
	fs.StringVar(&o.Note, "note", o.Note, "conditions to record with the numbers (where the control plane runs, fsync, load)")
	fs.StringVar(&o.From, "from", o.From, "directory of an earlier run: read its report.json instead of running scenarios (with --doc, to publish it)")
	fs.StringVar(&o.Doc, "doc", o.Doc, "Markdown document (e.g. docs/performance/results.md) whose generated results section to rewrite from the report; its plots go to bench/ next to it")
}

// ParseRates reads a comma-separated list of rates per second; "burst" means 0, all at once.
func ParseRates(s string) ([]float64, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var rates []float64
	for _, field := range strings.Split(s, ",") {
		field = strings.TrimSpace(field)
		if field == "burst" {
			rates = append(rates, 0)
			continue
		}
		r, err := strconv.ParseFloat(field, 64)
		if err != nil || r < 0 {
			return nil, fmt.Errorf("--rate: %q is not a rate; give claims per second like 5,20 or burst", field)
		}
		rates = append(rates, r)
	}
	return rates, nil
}

// Validate names the flag at fault and what to give instead.
func (o *Options) Validate() error {
	if o.From != "" && o.Compare == "" {
		return nil // nothing runs; ReadReport says what is wrong with the directory
	}
	_, err := ParseRates(o.Rates)
	var errs []error
	errs = append(errs, err)
	if o.Out == "" {
		errs = append(errs, errors.New("--out: give a directory for the results"))
	}
	if o.Cold < 0 {
		errs = append(errs, fmt.Errorf("--cold=%d: give 0 to skip the cold scenario or a positive count", o.Cold))
	}
	if o.Compare != "" {
		if o.From != "" || o.Doc != "" {
			errs = append(errs, errors.New("--compare runs two controllers; it cannot be combined with --from or --doc"))
		}
		if _, err := ParseCompare(o.Compare); err != nil {
			errs = append(errs, err)
		}
		if o.Controller.Namespace == "" || o.Controller.Deployment == "" {
			errs = append(errs, errors.New("--compare needs the controller's Deployment: give --controller-namespace and --controller-deployment"))
		}
	}
	if o.Hold < 0 {
		errs = append(errs, fmt.Errorf("--hold=%d: give 0 to skip the hold scenario or a positive count", o.Hold))
	}
	if o.RuntimeRequests < 0 {
		errs = append(errs, fmt.Errorf("--runtime=%d: give 0 to skip the runtime scenario or a positive count", o.RuntimeRequests))
	}
	if o.RuntimeRequests > 0 {
		if o.Runtime.Image == "" {
			errs = append(errs, errors.New("--runtime-image is empty: give an image that runs sandboxd, such as "+DefaultRuntimeImage+" of paddock dev up"))
		}
		if o.Runtime.Router.Selector != "" && (o.Runtime.Router.Namespace == "" || o.Runtime.Router.Port <= 0) {
			errs = append(errs, errors.New("--router-selector needs --router-namespace and a positive --router-port; an empty --router-selector measures no router"))
		}
	}
	if o.E2BCreates < 0 {
		errs = append(errs, fmt.Errorf("--e2b=%d: give 0 to skip the e2b scenarios or a positive count", o.E2BCreates))
	}
	if o.E2BCreates > 0 {
		if rates, err := ParseRates(o.E2BRates); err != nil || len(rates) == 0 {
			errs = append(errs, fmt.Errorf("--e2b-rate=%q: give creates per second like 5,20, or burst", o.E2BRates))
		}
		errs = append(errs, o.E2B.Validate())
		if o.E2B.ExistingPool && (o.E2BPool != 0 || o.E2BIdleCPU != "" || o.E2B.Namespace != "") {
			errs = append(errs, errors.New("--e2b-existing-pool uses --e2b-template's own pool in its own namespace: leave --e2b-pool, --e2b-idle-cpu and --e2b-namespace unset (set the pool's annotations on the pool instead)"))
		}
		if o.E2BPool < 0 {
			errs = append(errs, fmt.Errorf("--e2b-pool=%d: give the pool's members, or 0 for as many as --e2b", o.E2BPool))
		}
		if _, err := ParseIdleCPUs(o.E2BIdleCPU); err != nil {
			errs = append(errs, err)
		}
	}
	if o.Hold > 0 && (o.Controller.Namespace == "" || o.Controller.Selector == "" || o.Controller.MetricsPort <= 0) {
		errs = append(errs, errors.New("--hold needs the controller's Pods: give --controller-namespace, --controller-selector and --controller-metrics-port"))
	}
	for _, s := range o.Scenarios() {
		if err := s.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w (check --pool, --count, --timeout)", s.Name(), err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if len(o.Scenarios()) == 0 {
		return errors.New("nothing to run: give --rate for warm scenarios, --cold for a cold one, --hold for a hold one, --runtime for a runtime one or --e2b for e2b ones")
	}
	return nil
}

// Scenarios lists what the options ask for: one warm scenario per rate, the cold one, the runtime
// one, one e2b scenario per E2B rate, the hold one.
func (o *Options) Scenarios() []Scenario {
	rates, _ := ParseRates(o.Rates)
	var out []Scenario
	for _, r := range rates {
		out = append(out, Scenario{Kind: KindWarm, PoolSize: o.PoolSize, Count: o.Count, Rate: r,
			Timeout: o.Timeout, RefillWindow: o.RefillWindow})
	}
	if o.Cold > 0 {
		out = append(out, Scenario{Kind: KindCold, Count: o.Cold, Timeout: o.Timeout})
	}
	if o.RuntimeRequests > 0 {
		out = append(out, Scenario{Kind: KindRuntime, Count: o.RuntimeRequests, LoadRequests: o.RuntimeLoad,
			Concurrency: o.RuntimeConcurrency, Timeout: o.Timeout})
	}
	if o.E2BCreates > 0 {
		e2bRates, _ := ParseRates(o.E2BRates)
		idles, _ := ParseIdleCPUs(o.E2BIdleCPU)
		for _, r := range e2bRates {
			if o.E2B.ExistingPool {
				ns, name, _ := strings.Cut(o.E2B.Template, "/")
				out = append(out, Scenario{Kind: KindE2B, PoolSize: o.E2BCreates, Count: o.E2BCreates, Rate: r,
					Timeout: o.Timeout, Namespace: ns, ExistingTemplate: name})
				continue
			}
			for _, idle := range idles {
				out = append(out, Scenario{Kind: KindE2B, PoolSize: cmp.Or(o.E2BPool, o.E2BCreates), Count: o.E2BCreates, Rate: r,
					Timeout: o.Timeout, Namespace: o.E2B.Namespace, IdleCPU: idle})
			}
		}
	}
	// Last: its thousands of objects would otherwise be in the cluster during the others.
	if o.Hold > 0 {
		out = append(out, Scenario{Kind: KindHold, Count: o.Hold, Timeout: o.HoldTimeout})
	}
	return out
}

// ParseIdleCPUs parses --e2b-idle-cpu: CPU quantities above zero, or empty for none; an empty
// list is one scenario without.
func ParseIdleCPUs(s string) ([]string, error) {
	var out []string
	for v := range strings.SplitSeq(s, ",") {
		v = strings.TrimSpace(v)
		if v != "" {
			if q, err := resource.ParseQuantity(v); err != nil || q.Sign() <= 0 {
				return nil, fmt.Errorf("--e2b-idle-cpu=%q: %q is not a CPU quantity above zero; give values like ',10m' (an empty one runs without the annotation)", s, v)
			}
		}
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out, nil
}
