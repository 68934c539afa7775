// Package cluster is the end-to-end tier of the local dev cluster (`paddock dev up`): real pods
// on the real node, logs, exec, DNS, volumes, a KWOK pod, and a `dev down` that leaves nothing.
//
// By default TestMain builds the CLI, brings a cluster up in its own state dir and takes it down
// at the end. With -cluster-kubeconfig (or PADDOCK_E2E_KUBECONFIG) it uses a running cluster instead and
// leaves it alone.
package cluster

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/paddock-dev/paddock/test/framework"
)

var (
	kubeconfigFlag = flag.String("cluster-kubeconfig", os.Getenv("PADDOCK_E2E_KUBECONFIG"), "use the cluster of this kubeconfig instead of bringing one up")
	stateDirFlag   = flag.String("state-dir", "/var/lib/paddock-e2e", "state dir of the cluster the tests bring up")
	kwokNodesFlag  = flag.Int("kwok-nodes", 2, "KWOK nodes of the cluster the tests bring up")
)

// suite is what every test uses.
var suite struct {
	restConfig *rest.Config
	client     kubernetes.Interface
	// owned is set when the tests brought the cluster up and so must take it down.
	owned      bool
	paddock    string // the CLI binary
	stateDir   string
	kubeconfig string
	before     hostSnapshot
}

func TestMain(m *testing.M) {
	flag.Parse()
	// The clients log through controller-runtime's logger; only warnings and errors matter here.
	ctrl.SetLogger(logr.FromSlogHandler(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	code, err := run(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		code = 1
	}
	os.Exit(code)
}

func run(m *testing.M) (int, error) {
	kubeconfig := *kubeconfigFlag
	if kubeconfig == "" {
		if os.Geteuid() != 0 {
			return 0, fmt.Errorf("bringing up a dev cluster needs root; run as root or pass -cluster-kubeconfig")
		}
		tmp, err := os.MkdirTemp("", "paddock-e2e-")
		if err != nil {
			return 0, err
		}
		defer os.RemoveAll(tmp)
		suite.paddock = filepath.Join(tmp, "paddock")
		build := exec.Command("go", "build", "-o", suite.paddock, "./cmd/paddock")
		build.Dir = framework.RepoRoot()
		if out, err := build.CombinedOutput(); err != nil {
			return 0, fmt.Errorf("build the CLI: %w\n%s", err, out)
		}
		suite.stateDir = *stateDirFlag
		if suite.before, err = snapshotHost(suite.stateDir); err != nil {
			return 0, err
		}
		start := time.Now()
		up := exec.Command(suite.paddock, "dev", "up", "--state-dir="+suite.stateDir, fmt.Sprintf("--kwok-nodes=%d", *kwokNodesFlag))
		up.Dir = framework.RepoRoot()
		up.Stdout, up.Stderr = os.Stderr, os.Stderr
		suite.owned = true
		// Whatever happens next, take the cluster down; the test proves down is clean, this only
		// makes sure a failed run leaves nothing either.
		defer func() {
			if _, err := paddockDown(); err != nil {
				fmt.Fprintln(os.Stderr, "e2e: dev down:", err)
			}
		}()
		if err := up.Run(); err != nil {
			return 0, fmt.Errorf("paddock dev up: %w", err)
		}
		fmt.Fprintf(os.Stderr, "e2e: paddock dev up took %s\n", time.Since(start).Round(time.Millisecond))
		kubeconfig = filepath.Join(suite.stateDir, "kubeconfig")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return 0, fmt.Errorf("load kubeconfig %s: %w", kubeconfig, err)
	}
	suite.restConfig = cfg
	suite.kubeconfig = kubeconfig
	if suite.client, err = kubernetes.NewForConfig(cfg); err != nil {
		return 0, err
	}
	return m.Run(), nil
}

// paddockDown runs `paddock dev down` once; later calls do nothing.
var downDone bool

func paddockDown() (string, error) {
	if !suite.owned || downDone {
		return "", nil
	}
	downDone = true
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var out bytes.Buffer
	down := exec.CommandContext(ctx, suite.paddock, "dev", "down", "--state-dir="+suite.stateDir)
	down.Stdout, down.Stderr = &out, &out
	err := down.Run()
	return out.String(), err
}
