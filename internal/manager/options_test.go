package manager

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/paddock-dev/paddock/internal/controller/sandbox"
	"github.com/paddock-dev/paddock/internal/controller/sandboxsnapshot"
)

func parse(t *testing.T, args ...string) (*Options, error) {
	t.Helper()
	o := NewOptions()
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o.AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	return o, o.Validate()
}

func TestDefaultsAreValid(t *testing.T) {
	o, err := parse(t)
	if err != nil {
		t.Fatalf("default options are invalid: %v", err)
	}
	if o.SandboxWriteBehindWindow != 0 {
		t.Errorf("--sandbox-write-behind-window defaults to %s, want 0 (off)", o.SandboxWriteBehindWindow)
	}
	if !o.SandboxCredentials {
		t.Error("--sandbox-credentials defaults to false, want true: every Sandbox gets its own tokens")
	}
	if key, err := o.credentialsSecretKey(); err != nil || key.Name != "paddock-credentials-key" || key.Namespace == "" {
		t.Errorf("default credentials Secret = %v, %v; want paddock-credentials-key in the controller's namespace", key, err)
	}
	o, err = parse(t, "--credentials-secret=sec/key", "--sandbox-credentials=false")
	if key, kerr := o.credentialsSecretKey(); err != nil || kerr != nil || key.String() != "sec/key" || o.SandboxCredentials {
		t.Errorf("--credentials-secret=sec/key --sandbox-credentials=false: %v, %v, %v", key, kerr, o.SandboxCredentials)
	}
}

func TestFlagsParse(t *testing.T) {
	o, err := parse(t, "--extensions", "-leader-elect=false", "--kube-api-qps=50", "--sandbox-concurrent-workers=7",
		"--cluster-domain=example.internal", "--router-pod-labels=app=router,tier=edge", "--controller-pod-labels=app=ctl",
		"--sandbox-warm-pool-replenish-delay=2s",
		"--sandbox-write-behind-window=250ms", "--sandboxd-image=registry.test/sandbox:v1",
		"--image-config-registry-mirror=127.0.0.1:5001=http://198.18.255.1:5001, registry.test=https://mirror.test")
	if err != nil {
		t.Fatalf("parsing: %v", err)
	}
	if !o.Extensions || o.LeaderElect || o.KubeAPIQPS != 50 || o.SandboxWorkers != 7 || o.ClusterDomain != "example.internal" ||
		o.SandboxWriteBehindWindow != 250*time.Millisecond || sandboxOptions(o).SandboxdImage != "registry.test/sandbox:v1" {
		t.Errorf("flags not applied: %+v", o)
	}
	if got, want := o.ImageConfigMirrors.String(), "127.0.0.1:5001=http://198.18.255.1:5001,registry.test=https://mirror.test"; got != want {
		t.Errorf("--image-config-registry-mirror: %s, want %s", got, want)
	}
	if diff := cmp.Diff(map[string]string{"app": "router", "tier": "edge"}, o.RouterPodLabels); diff != "" {
		t.Errorf("router pod labels (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{"app": "ctl"}, templateOptions(o).ControllerPodLabels); diff != "" {
		t.Errorf("controller pod labels given to the template controller (-want +got):\n%s", diff)
	}
}

func TestInvalidOptionsNameTheFlag(t *testing.T) {
	tests := []struct {
		args     []string
		wantFlag string
	}{
		{[]string{"--kube-api-burst=0"}, "--kube-api-burst"},
		{[]string{"--sandbox-concurrent-workers=0"}, "--sandbox-concurrent-workers"},
		{[]string{"--sandbox-claim-concurrent-workers=-1"}, "--sandbox-claim-concurrent-workers"},
		{[]string{"--sandbox-warm-pool-concurrent-workers=0"}, "--sandbox-warm-pool-concurrent-workers"},
		{[]string{"--sandbox-warm-pool-max-batch-size=0"}, "--sandbox-warm-pool-max-batch-size"},
		{[]string{"--sandbox-warm-pool-max-refill-rate=-1"}, "--sandbox-warm-pool-max-refill-rate"},
		{[]string{"--sandbox-warm-pool-max-refill-rate=NaN"}, "--sandbox-warm-pool-max-refill-rate"},
		{[]string{"--kube-api-qps=+Inf"}, "--kube-api-qps"},
		{[]string{"--sandbox-warm-pool-readiness-grace-period=0s"}, "--sandbox-warm-pool-readiness-grace-period"},
		{[]string{"--sandbox-warm-pool-unschedulable-recheck-interval=-1m"}, "--sandbox-warm-pool-unschedulable-recheck-interval"},
		{[]string{"--sandbox-warm-pool-replenish-delay=-1s"}, "--sandbox-warm-pool-replenish-delay"},
		{[]string{"--sandbox-warm-pool-max-starting=-1"}, "--sandbox-warm-pool-max-starting=-1: must be 0 (no limit) or more"},
		{[]string{"--sandbox-status-coalesce-window=-1s"}, "--sandbox-status-coalesce-window"},
		{[]string{"--metrics-bind-address=8080"}, "--metrics-bind-address"},
		{[]string{"--health-probe-bind-address=localhost"}, "--health-probe-bind-address"},
		{[]string{"--cluster-domain="}, "--cluster-domain"},
		{[]string{"--sandbox-write-behind-window=-1ms"}, "--sandbox-write-behind-window"},
		{[]string{"--credentials-secret=no-namespace"}, "--credentials-secret"},
		{[]string{"--credentials-secret=ns/"}, "--credentials-secret"},
		{[]string{"--credentials-secret=a/b/c"}, "--credentials-secret"},
		{[]string{"--image-config-registry-mirror=127.0.0.1:5001"}, "image-config-registry-mirror"},
		{[]string{"--image-config-registry-mirror-credentials=/nonexistent"}, "--image-config-registry-mirror-credentials=/nonexistent"},
		{[]string{"--image-config-registry-mirror=127.0.0.1:5001=198.18.255.1:5001"}, "image-config-registry-mirror"},

		{[]string{"--claim-observability-annotations", "--disable-claim-observability-annotations"}, "--disable-claim-observability-annotations"},
		{[]string{"--sandboxd-allow-unauthenticated-network", "--sandbox-credentials=false"}, "--sandboxd-allow-unauthenticated-network needs --sandbox-credentials"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			_, err := parse(t, tt.args...)
			if err == nil || !strings.Contains(err.Error(), tt.wantFlag) {
				t.Fatalf("Validate() = %v, want an error naming %s", err, tt.wantFlag)
			}
		})
	}
}

func TestAllProblemsReportedAtOnce(t *testing.T) {
	_, err := parse(t, "--kube-api-burst=0", "--sandbox-concurrent-workers=0")
	if err == nil || !strings.Contains(err.Error(), "--kube-api-burst") || !strings.Contains(err.Error(), "--sandbox-concurrent-workers") {
		t.Fatalf("Validate() = %v, want both problems", err)
	}
}

func TestRouterPodLabelsRejectsBadInput(t *testing.T) {
	for _, arg := range []string{"--router-pod-labels=app", "--router-pod-labels=bad key=x", "--router-pod-labels=app=" + strings.Repeat("x", 64)} {
		if _, err := parse(t, arg); err == nil {
			t.Errorf("%s: parsed, want an error", arg)
		}
	}
}

// TestMigrationProfileFlagsReachTheControllers: the profile's labels go to the template
// controller's policy and its network opt-in to every sandbox's environment; by default neither.
func TestMigrationProfileFlagsReachTheControllers(t *testing.T) {
	o, err := parse(t)
	if err != nil {
		t.Fatal(err)
	}
	if templateOptions(o).ClientPodLabels != nil || sandboxOptions(o).SandboxdEnv != nil {
		t.Errorf("defaults: client labels %v, sandboxd env %v; want none", templateOptions(o).ClientPodLabels, sandboxOptions(o).SandboxdEnv)
	}
	o, err = parse(t, "--sandbox-client-pod-labels=paddock.dev/sandbox-client=true", "--sandboxd-allow-unauthenticated-network")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{"paddock.dev/sandbox-client": "true"}, templateOptions(o).ClientPodLabels); diff != "" {
		t.Errorf("client labels (-want +got):\n%s", diff)
	}
	env := sandboxOptions(o).SandboxdEnv
	if len(env) != 1 || env[0].Name != "SANDBOXD_ALLOW_UNAUTHENTICATED_NETWORK" || env[0].Value != "true" {
		t.Errorf("sandboxd env %+v, want SANDBOXD_ALLOW_UNAUTHENTICATED_NETWORK=true", env)
	}
}

// TestSnapshotFlagsReachTheController: the --snapshot-* flags configure the snapshot controller;
// a relative node path is refused, naming it.
func TestSnapshotFlagsReachTheController(t *testing.T) {
	o, err := parse(t, "--snapshot-repository=reg.test:5000/snaps", "--snapshot-capture-image=reg.test:5000/snapshot:v1",
		"--snapshot-insecure-registry", "--snapshot-containerd-socket=/run/k/containerd.sock", "--snapshot-node-paths=/run/k, /var/lib/k",
		"--snapshot-capture-namespace=paddock-capture", "--snapshot-runsc=/opt/gvisor/runsc")
	if err != nil {
		t.Fatalf("parsing: %v", err)
	}
	got := snapshotOptions(o)
	want := sandboxsnapshot.Options{Runsc: "/opt/gvisor/runsc", Namespace: "paddock-capture", Repository: "reg.test:5000/snaps", CaptureImage: "reg.test:5000/snapshot:v1", InsecureRegistry: true,
		ContainerdSocket: "/run/k/containerd.sock", NodePaths: []string{"/run/k", "/var/lib/k"}}
	if d := cmp.Diff(want, got, cmpopts.IgnoreFields(sandboxsnapshot.Options{}, "APIReader", "Clock")); d != "" {
		t.Errorf("snapshot options (-want +got):\n%s", d)
	}
	if _, err := parse(t, "--snapshot-node-paths=run/k"); err == nil || !strings.Contains(err.Error(), `"run/k" is not an absolute path`) {
		t.Errorf("relative node path: error %v, want it named", err)
	}
	o, err = parse(t, "--snapshot-runsc=runsc")
	if err == nil {
		err = o.Validate()
	}
	if err == nil || !strings.Contains(err.Error(), "--snapshot-runsc=runsc: must be the absolute path") {
		t.Errorf("relative runsc: error %v, want the flag named", err)
	}
}

// TestMemoryFlagsReachTheController: the --snapshot-memory-* flags size and time the suspend that
// keeps memory; the defaults are the controller's own, and bad values are refused, naming the flag.
func TestMemoryFlagsReachTheController(t *testing.T) {
	o, err := parse(t, "--snapshot-capture-image=reg.test:5000/snapshot:v1")
	if err != nil {
		t.Fatal(err)
	}
	want := sandbox.MemoryOptions{DefaultMaxBytes: sandbox.DefaultMemoryImageMaxBytes,
		CheckpointTimeout: sandbox.DefaultCheckpointTimeout, RestoreTimeout: sandbox.DefaultRestoreTimeout}
	if d := cmp.Diff(want, sandboxOptions(o).Memory, cmpopts.IgnoreFields(sandbox.MemoryOptions{}, "Namespace", "Image")); d != "" {
		t.Errorf("default memory options (-want +got):\n%s", d)
	}
	o, err = parse(t, "--snapshot-capture-image=reg.test:5000/snapshot:v1", "--snapshot-memory-max-size=512Mi",
		"--snapshot-memory-checkpoint-timeout=90s", "--snapshot-memory-restore-timeout=45s")
	if err != nil {
		t.Fatal(err)
	}
	want = sandbox.MemoryOptions{DefaultMaxBytes: 512 << 20, CheckpointTimeout: 90 * time.Second, RestoreTimeout: 45 * time.Second}
	if d := cmp.Diff(want, sandboxOptions(o).Memory, cmpopts.IgnoreFields(sandbox.MemoryOptions{}, "Namespace", "Image")); d != "" {
		t.Errorf("memory options from flags (-want +got):\n%s", d)
	}
	for arg, msg := range map[string]string{
		"--snapshot-memory-max-size=0":            "is not a positive quantity",
		"--snapshot-memory-max-size=lots":         "is not a positive quantity",
		"--snapshot-memory-checkpoint-timeout=0s": "--snapshot-memory-checkpoint-timeout=0s: must be greater than 0",
		"--snapshot-memory-restore-timeout=-1m":   "--snapshot-memory-restore-timeout=-1m0s: must be greater than 0",
	} {
		if _, err := parse(t, arg); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("%s: error %v, want it to say %q", arg, err, msg)
		}
	}
}

func TestImageConfigMirrorCredentials(t *testing.T) {
	file := filepath.Join(t.TempDir(), ".dockerconfigjson")
	if err := os.WriteFile(file, []byte(`{"auths":{"198.18.255.1:5001":{"username":"reader","password":"pw"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	o, err := parse(t, "--image-config-registry-mirror=127.0.0.1:5001=http://198.18.255.1:5001", "--image-config-registry-mirror-credentials="+file)
	if err != nil {
		t.Fatal(err)
	}
	if a := o.ImageConfigMirrors["127.0.0.1:5001"].Auth; a == nil || a.Username != "reader" || a.Password != "pw" {
		t.Errorf("the mirror's credentials: %+v", a)
	}
}
