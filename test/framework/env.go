// Package framework starts the real kube-apiserver and etcd that integration tests run against,
// with the project's CRDs installed, and holds the helpers every integration test shares.
package framework

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/paddock-dev/paddock/internal/manager"
)

// ServiceCIDR is the API server's Service cluster IP range; PodIPs made up by tests come from
// PodCIDR. Both lie in 198.18.0.0/15, the only range Paddock tests may use.
const (
	ServiceCIDR = "198.18.0.0/24"
	PodCIDR     = "198.19.0.0/16"
)

// Env is a running API server with the project's CRDs.
type Env struct {
	Config *rest.Config
	Client client.Client
	Scheme *k8sruntime.Scheme

	testEnv *envtest.Environment
}

// NewScheme returns the scheme the controller manager uses.
func NewScheme() *k8sruntime.Scheme { return manager.NewScheme() }

// RepoRoot returns the root of the source tree this package was compiled from.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// BinaryDir returns the directory holding kube-apiserver and etcd. KUBEBUILDER_ASSETS wins when
// set; otherwise hack/build-k8s.sh builds them into the shared cache (once per machine) and
// reports where.
func BinaryDir() (string, error) {
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		return dir, nil
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(filepath.Join(RepoRoot(), "hack", "build-k8s.sh"), "kube-apiserver", "etcd")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("building kube-apiserver and etcd with hack/build-k8s.sh: %w\n%s", err, stderr.String())
	}
	return strings.TrimSpace(stdout.String()), nil
}

// The CRD directories under config/crd: the core API group alone is what a core-only install
// (dist/paddock-core.yaml) has.
const (
	CoreCRDs      = "core"
	ExtensionCRDs = "extensions"
)

// Start starts etcd and kube-apiserver and installs every CRD from config/crd.
func Start() (*Env, error) { return StartWithCRDs(CoreCRDs, ExtensionCRDs) }

// StartWithCRDs is Start installing only the CRDs of the named config/crd directories.
func StartWithCRDs(crdDirs ...string) (*Env, error) {
	dir, err := BinaryDir()
	if err != nil {
		return nil, err
	}
	paths := make([]string, 0, len(crdDirs))
	for _, d := range crdDirs {
		paths = append(paths, filepath.Join(RepoRoot(), "config", "crd", d))
	}
	scheme := NewScheme()
	testEnv := &envtest.Environment{
		CRDDirectoryPaths:     paths,
		ErrorIfCRDPathMissing: true,
		BinaryAssetsDirectory: dir,
		Scheme:                scheme,
	}
	// Test Services get their (never used) cluster IPs from the range the project is allowed to use.
	testEnv.ControlPlane.GetAPIServer().Configure().Set("service-cluster-ip-range", ServiceCIDR)
	cfg, err := testEnv.Start()
	if err != nil {
		return nil, fmt.Errorf("starting kube-apiserver and etcd from %s: %w", dir, err)
	}
	// Tests create many objects quickly; the client-side limiter would only slow them down.
	cfg.QPS, cfg.Burst = -1, 1000
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		_ = testEnv.Stop()
		return nil, fmt.Errorf("creating client: %w", err)
	}
	return &Env{Config: cfg, Client: c, Scheme: scheme, testEnv: testEnv}, nil
}

// Stop stops the API server and etcd.
func (e *Env) Stop() error { return e.testEnv.Stop() }

// RunMain starts an Env, stores it in *env, runs the package's tests and stops it. Use it from
// TestMain: `func TestMain(m *testing.M) { framework.RunMain(m, &env) }`. Each setup runs after
// the API server is up (typically to start a manager with the controllers under test); the
// function it returns runs after the tests, before the API server stops.
func RunMain(m *testing.M, env **Env, setup ...func(*Env) (func(), error)) {
	RunMainWithCRDs(m, env, []string{CoreCRDs, ExtensionCRDs}, setup...)
}

// RunMainWithCRDs is RunMain with only the CRDs of the named config/crd directories installed.
func RunMainWithCRDs(m *testing.M, env **Env, crdDirs []string, setup ...func(*Env) (func(), error)) {
	e, err := StartWithCRDs(crdDirs...)
	if err != nil {
		fmt.Fprintf(os.Stderr, "integration environment: %v\n", err)
		os.Exit(1)
	}
	*env = e
	code := runWith(m, e, setup)
	if err := e.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "stopping integration environment: %v\n", err)
	}
	os.Exit(code)
}

func runWith(m *testing.M, e *Env, setup []func(*Env) (func(), error)) int {
	for _, s := range setup {
		stop, err := s(e)
		if err != nil {
			fmt.Fprintf(os.Stderr, "integration environment setup: %v\n", err)
			return 1
		}
		defer stop()
	}
	return m.Run()
}

// Namespace creates a namespace with a generated name for one test and deletes it when the test
// ends. Tests in one package share an API server; namespaces keep them apart.
func (e *Env) Namespace(t testing.TB) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "test-"}}
	if err := e.Client.Create(context.Background(), ns); err != nil {
		t.Fatalf("creating namespace: %v", err)
	}
	t.Cleanup(func() {
		// envtest runs no namespace controller, so the namespace stays Terminating; deleting it
		// still marks it, and nothing else in the package uses the name.
		_ = e.Client.Delete(context.Background(), ns)
	})
	return ns.Name
}

// Context returns a context that ends with the test or after the given timeout.
func Context(t testing.TB, timeout time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	return ctx
}
