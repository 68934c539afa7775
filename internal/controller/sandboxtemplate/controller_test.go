package sandboxtemplate

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

func TestNewValidatesOptions(t *testing.T) {
	c := fake.NewClientBuilder().Build()
	for _, tt := range []struct {
		name    string
		c       client.Client
		opts    Options
		wantErr string
	}{
		{name: "defaults", c: c},
		{name: "no client", wantErr: "needs a client"},
		{name: "negative workers", c: c, opts: Options{Workers: -1}, wantErr: "Workers is -1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r, err := New(tt.c, nil, tt.opts)
			if tt.wantErr == "" {
				def := DefaultOptions()
				if err != nil || r.opts.Workers != def.Workers || r.opts.RouterNamespace != def.RouterNamespace ||
					!cmp.Equal(r.opts.RouterPodLabels, def.RouterPodLabels) || r.opts.ControllerNamespace != def.ControllerNamespace ||
					!cmp.Equal(r.opts.ControllerPodLabels, def.ControllerPodLabels) || r.opts.APIReader == nil || r.recorder == nil {
					t.Fatalf("New = %+v, %v; want the defaults", r, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("New error = %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}
