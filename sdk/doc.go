// Package sdk claims agent sandboxes from warm pools and talks to the runtime inside them.
//
// A Client creates a SandboxClaim (extensions.agents.x-k8s.io/v1beta1) from a SandboxWarmPool and
// waits for it with a watch, bounded by the caller's context. A failed or abandoned claim is
// deleted again; errors are *ClaimError values that wrap ErrPoolNotFound, ErrNotReady,
// ErrClaimFailed, ErrSandboxGone or ErrSuspended and carry the controller's last Ready reason.
// Attach picks up an existing claim by name, Lookup returns its handle in any state, and
// Client.Resume (or Sandbox.Resume) brings a suspended sandbox back and waits for Ready. The
// returned Sandbox's Runtime runs commands over the runtime's HTTP API (the legacy API on port
// 8888 that sandboxd and the Python runtime serve), either straight to the pod IP or through
// the sandbox-router; Runtime.Stream and Runtime.Exec stream a command's input and output, on a
// pseudo-terminal if asked, over sandboxd's gRPC ProcessService, straight to the pod.
// Sandbox.Files moves files and directories of any size over sandboxd's REST /v1/files API.
//
// Quickstart:
//
//	cfg, _ := clientcmd.BuildConfigFromFlags("", os.Getenv("KUBECONFIG"))
//	c, _ := sdk.New(cfg, sdk.Options{RouterURL: "http://sandbox-router-svc:8080"})
//	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
//	defer cancel()
//	sb, err := c.Claim(ctx, sdk.ClaimOptions{WarmPool: "python", Namespace: "agents"})
//	if err != nil { return err } // errors.Is(err, sdk.ErrPoolNotFound), ...
//	defer sb.Release(context.Background())
//	rt, _ := sb.Runtime()
//	res, _ := rt.Run(ctx, "python3 -c 'print(6*7)'")
//	fmt.Print(res.Stdout)
package sdk
