package bench

import (
	"flag"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseRates(t *testing.T) {
	tests := []struct {
		in      string
		want    []float64
		wantErr string
	}{
		{in: "", want: nil},
		{in: "5", want: []float64{5}},
		{in: "5, 20,burst,0.5", want: []float64{5, 20, 0, 0.5}},
		{in: "5,fast", wantErr: `--rate: "fast" is not a rate`},
		{in: "-1", wantErr: `--rate: "-1" is not a rate`},
	}
	for _, tc := range tests {
		got, err := ParseRates(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("ParseRates(%q) error = %v, want %q", tc.in, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseRates(%q): %v", tc.in, err)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("ParseRates(%q) (-want +got):\n%s", tc.in, diff)
		}
	}
}

func TestOptionsFromFlags(t *testing.T) {
	o := NewOptions()
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	o.AddFlags(fs)
	if err := fs.Parse([]string{"--pool=5", "--count=10", "--rate=20,burst", "--cold=7", "--hold=100", "--hold-timeout=5m", "--timeout=1m", "--out=/tmp/x",
		"--runtime=50", "--runtime-load=500", "--runtime-concurrency=4", "--runtime-image=reg/sb:1", "--router-namespace=r", "--router-selector=app=r", "--router-port=81"}); err != nil {
		t.Fatal(err)
	}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	want := []Scenario{
		{Kind: KindWarm, PoolSize: 5, Count: 10, Rate: 20, Timeout: time.Minute, RefillWindow: 30 * time.Second},
		{Kind: KindWarm, PoolSize: 5, Count: 10, Rate: 0, Timeout: time.Minute, RefillWindow: 30 * time.Second},
		{Kind: KindCold, Count: 7, Timeout: time.Minute},
		{Kind: KindRuntime, Count: 50, LoadRequests: 500, Concurrency: 4, Timeout: time.Minute},
		{Kind: KindHold, Count: 100, Timeout: 5 * time.Minute},
	}
	if diff := cmp.Diff(want, o.Scenarios()); diff != "" {
		t.Errorf("Scenarios (-want +got):\n%s", diff)
	}
	wantTarget := RuntimeTarget{Image: "reg/sb:1", RESTPort: 8080, LegacyPort: 8888, Router: RouterTarget{Namespace: "r", Selector: "app=r", Port: 81}}
	if diff := cmp.Diff(wantTarget, o.Runtime); diff != "" {
		t.Errorf("runtime target (-want +got):\n%s", diff)
	}
}

func TestOptionsValidate(t *testing.T) {
	tests := []struct {
		name    string
		mutate  func(*Options)
		wantErr string
	}{
		{name: "bad rate", mutate: func(o *Options) { o.Rates = "x" }, wantErr: `--rate: "x"`},
		{name: "no out", mutate: func(o *Options) { o.Out = "" }, wantErr: "--out"},
		{name: "negative cold", mutate: func(o *Options) { o.Cold = -3 }, wantErr: "--cold=-3"},
		{name: "zero pool", mutate: func(o *Options) { o.PoolSize = 0 }, wantErr: "pool size 0"},
		{name: "nothing to run", mutate: func(o *Options) { o.Rates = "" }, wantErr: "nothing to run"},
		{name: "negative hold", mutate: func(o *Options) { o.Hold = -1 }, wantErr: "--hold=-1"},
		{name: "hold without controller", mutate: func(o *Options) { o.Hold, o.Controller.Selector = 10, "" }, wantErr: "--controller-selector"},
		{name: "negative runtime", mutate: func(o *Options) { o.RuntimeRequests = -2 }, wantErr: "--runtime=-2"},
		{name: "runtime without image", mutate: func(o *Options) { o.RuntimeRequests, o.Runtime.Image = 10, "" }, wantErr: "--runtime-image is empty"},
		{name: "router without port", mutate: func(o *Options) { o.RuntimeRequests, o.Runtime.Router.Port = 10, 0 }, wantErr: "--router-port"},
		{name: "runtime load without clients", mutate: func(o *Options) { o.RuntimeRequests, o.RuntimeConcurrency = 10, 0 }, wantErr: "concurrency 0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := NewOptions()
			tc.mutate(o)
			if err := o.Validate(); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Validate() = %v, want error containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestExecuteRejectsBadKubeconfig(t *testing.T) {
	o := NewOptions()
	o.Kubeconfig = t.TempDir() + "/missing"
	o.Out = t.TempDir()
	_, err := Execute(t.Context(), o)
	if err == nil || !strings.Contains(err.Error(), "loading the kubeconfig") {
		t.Fatalf("Execute() = %v, want an error about loading the kubeconfig", err)
	}
}
