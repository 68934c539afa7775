package sandboxwarmpool

import (
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

func TestNewValidatesOptions(t *testing.T) {
	c := fake.NewClientBuilder().Build()
	for _, tt := range []struct {
		name    string
		c       client.Client
		opts    Options
		wantErr []string
	}{
		{name: "defaults", c: c},
		{name: "no client", wantErr: []string{"needs a client"}},
		{name: "negative options", c: c, opts: Options{Workers: -1, ReadinessGracePeriod: -time.Second, MaxRefillRate: -1,
			AutosizeRateWindow: -time.Second, AutosizeStabilizationWindow: -time.Minute},
			wantErr: []string{"Workers is -1", "ReadinessGracePeriod is -1s", "MaxRefillRate is -1",
				"AutosizeRateWindow is -1s", "AutosizeStabilizationWindow is -1m0s"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r, err := New(tt.c, nil, tt.opts)
			if len(tt.wantErr) == 0 {
				def := DefaultOptions()
				if err != nil || r.opts.Workers != def.Workers || r.opts.MaxBatchSize != def.MaxBatchSize ||
					r.opts.ReadinessGracePeriod != def.ReadinessGracePeriod || r.opts.Clock == nil || r.recorder == nil {
					t.Fatalf("New = %+v, %v; want the defaults", r, err)
				}
				return
			}
			for _, want := range tt.wantErr {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("New error = %v, want one containing %q", err, want)
				}
			}
		})
	}
}
