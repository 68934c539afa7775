package manager

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/paddock-dev/paddock/internal/controller/sandbox"
	"github.com/paddock-dev/paddock/internal/controller/sandboxclaim"
	"github.com/paddock-dev/paddock/internal/controller/sandboxtemplate"
	"github.com/paddock-dev/paddock/internal/controller/sandboxwarmpool"
)

// TestDefaultsAreTheControllers checks that the manager's default flags hand each controller
// exactly the defaults that controller exports: a default declared in two places drifts.
func TestDefaultsAreTheControllers(t *testing.T) {
	o := NewOptions()
	if diff := cmp.Diff(sandboxtemplate.DefaultOptions(), templateOptions(o)); diff != "" {
		t.Errorf("SandboxTemplate options from the default flags (-controller's defaults +manager's):\n%s", diff)
	}
	if diff := cmp.Diff(sandboxwarmpool.DefaultOptions(), poolOptions(o), cmpopts.IgnoreFields(sandboxwarmpool.Options{}, "Clock")); diff != "" {
		t.Errorf("SandboxWarmPool options from the default flags (-controller's defaults +manager's):\n%s", diff)
	}
	if diff := cmp.Diff(sandboxclaim.DefaultOptions(), claimOptions(o), cmpopts.IgnoreFields(sandboxclaim.Options{}, "Clock")); diff != "" {
		t.Errorf("SandboxClaim options from the default flags (-controller's defaults +manager's):\n%s", diff)
	}
	// The registry reader is a dependency the manager supplies, like the clock, not a default.
	sb := sandboxOptions(o)
	if diff := cmp.Diff(sandbox.DefaultOptions(), sb, cmpopts.IgnoreFields(sandbox.Options{}, "Clock", "ImageConfigs")); diff != "" {
		t.Errorf("Sandbox options from the default flags (-controller's defaults +manager's):\n%s", diff)
	}
	if sb.ImageConfigs == nil {
		t.Error("the manager gives the Sandbox controller no image config reader: templates that ask for sandboxd injection without a command cannot start")
	}
}
