package sdk_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	"github.com/paddock-dev/paddock/sdk"
)

// Claim a sandbox from a warm pool, run a command in it through the router, and release it.
// It needs a cluster, so it has no Output line.
func Example() {
	cfg, err := clientcmd.BuildConfigFromFlags("", clientcmd.RecommendedHomeFile)
	if err != nil {
		log.Fatal(err)
	}
	c, err := sdk.New(cfg, sdk.Options{RouterURL: "http://sandbox-router-svc.agent-sandbox-system.svc:8080"})
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sb, err := c.Claim(ctx, sdk.ClaimOptions{WarmPool: "python", Namespace: "agents"})
	if err != nil {
		log.Fatal(err)
	}
	defer func() {
		if err := sb.Release(context.Background()); err != nil {
			log.Print(err)
		}
	}()
	rt, err := sb.Runtime()
	if err != nil {
		log.Fatal(err)
	}
	res, err := rt.Run(ctx, "python3 -c 'print(6*7)'")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Print(res.Stdout)
}

// Claim with a fixed name, labels, pod metadata, env and a shutdown time, and tell the failure
// kinds apart.
func ExampleClient_Claim() {
	cfg, err := clientcmd.BuildConfigFromFlags("", clientcmd.RecommendedHomeFile)
	if err != nil {
		log.Fatal(err)
	}
	c, err := sdk.New(cfg, sdk.Options{})
	if err != nil {
		log.Fatal(err)
	}
	shutdown := extensionsv1beta1.Lifecycle{ShutdownPolicy: extensionsv1beta1.ShutdownPolicyDelete}
	sb, err := c.Claim(context.Background(), sdk.ClaimOptions{
		WarmPool: "python", Namespace: "agents", Name: "review-42",
		Labels:    map[string]string{"team": "review"},
		PodLabels: map[string]string{"sandbox.users.io/task": "42"},
		Env:       []extensionsv1beta1.EnvVar{{Name: "TASK", Value: "42"}},
		Lifecycle: &shutdown,
	})
	var ce *sdk.ClaimError
	switch {
	case errors.Is(err, sdk.ErrPoolNotFound):
		log.Fatal("create the pool first: ", err)
	case errors.As(err, &ce) && errors.Is(err, sdk.ErrNotReady):
		log.Fatalf("not ready; the controller last said %s: %s", ce.Reason, ce.Message)
	case err != nil:
		log.Fatal(err)
	}
	fmt.Println(sb.SandboxName(), sb.PodIPs())
}

// Suspend a sandbox (its Pod goes, its storage stays) and resume it later.
func ExampleSandbox_Suspend() {
	var sb *sdk.Sandbox // from Client.Claim
	ctx := context.Background()
	if err := sb.Suspend(ctx); err != nil {
		log.Fatal(err)
	}
	if err := sb.Resume(ctx); err != nil {
		log.Fatal(err)
	}
}

// Talk to a runtime at a known URL without a cluster, here a stand-in that answers /exists/.
func ExampleNewRuntime() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `{"path":%q,"exists":true}`, r.URL.Path)
	}))
	defer srv.Close()
	rt, err := sdk.NewRuntime(sdk.Endpoint{URL: srv.URL})
	if err != nil {
		log.Fatal(err)
	}
	ok, err := rt.Exists(context.Background(), "notes/todo.txt")
	fmt.Println(ok, err)
	// Output: true <nil>
}

// Pick up a sandbox claimed earlier, perhaps by another program: resume it if it was suspended,
// copy a file in, and stream a command's output. It needs a cluster, so it has no Output line.
func ExampleClient_Resume() {
	cfg, err := clientcmd.BuildConfigFromFlags("", clientcmd.RecommendedHomeFile)
	if err != nil {
		log.Fatal(err)
	}
	c, err := sdk.New(cfg, sdk.Options{})
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sb, err := c.Attach(ctx, "agents", "my-agent")
	if errors.Is(err, sdk.ErrSuspended) {
		sb, err = c.Resume(ctx, "agents", "my-agent")
	}
	if err != nil {
		log.Fatal(err)
	}
	files, err := sb.Files()
	if err != nil {
		log.Fatal(err)
	}
	if err := files.Upload(ctx, "job/input.txt", strings.NewReader("6*7\n"), 0o644); err != nil {
		log.Fatal(err)
	}
	rt, err := sb.Runtime()
	if err != nil {
		log.Fatal(err)
	}
	code, err := rt.Exec(ctx, sdk.ExecOptions{Argv: []string{"sh", "-c", "bc < job/input.txt"}, Stdout: os.Stdout, Stderr: os.Stderr})
	fmt.Println("exit code", code, err)
}
