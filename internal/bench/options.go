package bench

import (
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"
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
}

// NewOptions returns small defaults: a run that finishes in seconds on a shared machine.
func NewOptions() *Options {
	return &Options{
		PoolSize:     20,
		Count:        40,
		Rates:        "5,20",
		Timeout:      2 * time.Minute,
		RefillWindow: 30 * time.Second,
		Image:        DefaultImage,
		Out:          "bench-out",
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
	fs.StringVar(&o.Image, "image", o.Image, "container image of the sandboxes")
	fs.BoolVar(&o.KWOK, "kwok", o.KWOK, "place the sandboxes on KWOK fake nodes (node label type=kwok, taint kwok.x-k8s.io/node=fake:NoSchedule)")
	fs.StringVar(&o.Out, "out", o.Out, "directory for report.json, report.md and the latency plots")
	fs.StringVar(&o.Note, "note", o.Note, "conditions to record with the numbers (where the control plane runs, fsync, load)")
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
	_, err := ParseRates(o.Rates)
	var errs []error
	errs = append(errs, err)
	if o.Out == "" {
		errs = append(errs, errors.New("--out: give a directory for the results"))
	}
	if o.Cold < 0 {
		errs = append(errs, fmt.Errorf("--cold=%d: give 0 to skip the cold scenario or a positive count", o.Cold))
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
		return errors.New("nothing to run: give --rate for warm scenarios or --cold for a cold one")
	}
	return nil
}

// Scenarios lists what the options ask for: one warm scenario per rate, then the cold one.
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
	return out
}
