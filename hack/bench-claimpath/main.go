// Command bench-claimpath measures, once, the member's side of a warm E2B create against a locked
// sandboxd: the front door's probe and the controller's claim settings sent together, the probe's
// answer, then the first and a second commands.run('true'), as the E2B SDK sends them. It prints
// one JSON line of durations in milliseconds; hack/bench-claimpath/run.sh starts a fresh sandboxd
// per run, under gVisor or natively, and summarizes (docs/performance/results.md).
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"time"

	"connectrpc.com/connect"
	"k8s.io/utils/ptr"

	"github.com/paddock-dev/paddock/api/e2b"
	pb "github.com/paddock-dev/paddock/api/proto/envd/process"
	"github.com/paddock-dev/paddock/api/proto/envd/process/processpbconnect"
	"github.com/paddock-dev/paddock/api/sandboxd"
	"github.com/paddock-dev/paddock/internal/sandboxd/claim"
)

// probeRetry is the E2B front door's wait before probing again after a refusal.
const probeRetry = 20 * time.Millisecond

func main() {
	host := flag.String("host", "", "sandboxd's address (IP), reached on the REST port 8080 and envd's 49983")
	token := flag.String("token", "", "the sandbox token")
	control := flag.String("control-token", "", "the control token")
	flag.Parse()
	if *host == "" || *token == "" || *control == "" {
		fmt.Fprintln(os.Stderr, "give --host, --token and --control-token")
		os.Exit(2)
	}
	out, err := measure(context.Background(), *host, *token, *control)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	_ = json.NewEncoder(os.Stdout).Encode(out)
}

type result struct {
	// Settings is the claim-settings PUT's round trip; Accepted when the probe that the daemon
	// accepted returned, since the probe and the PUT were sent; Refused the probes refused before.
	Settings, Accepted float64
	Refused            int
	// FirstStarted and FirstEnded are the first command's start and end events since it was sent;
	// Second is a second command, start to end.
	FirstStarted, FirstEnded, Second float64
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func measure(ctx context.Context, host, token, control string) (result, error) {
	var r result
	envdURL := fmt.Sprintf("http://%s:%d", host, e2b.EnvdPort)
	// One keep-alive client for the probe and the commands, as the front door's transport is.
	hc := &http.Client{Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 4}, Timeout: time.Minute}
	procs := processpbconnect.NewProcessClient(hc, envdURL, connect.WithProtoJSON())
	t0 := time.Now()
	probed := make(chan error, 1)
	go func() {
		for {
			req := connect.NewRequest(&pb.ListRequest{})
			req.Header().Set(e2b.AccessTokenHeader, token)
			_, err := procs.List(ctx, req)
			if connect.CodeOf(err) != connect.CodePermissionDenied {
				probed <- err
				return
			}
			r.Refused++
			time.Sleep(probeRetry) // the front door's retry, which the measurement reproduces
		}
	}()
	body, _ := json.Marshal(claim.Settings{ClaimName: "bench", ClaimUID: "uid-bench"})
	put, _ := http.NewRequestWithContext(ctx, http.MethodPut, fmt.Sprintf("http://%s:%d%s", host, sandboxd.RESTPort, sandboxd.ClaimSettingsPath), bytes.NewReader(body))
	put.Header.Set("Authorization", "Bearer "+control)
	put.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Timeout: time.Minute}).Do(put)
	if err != nil {
		return r, err
	}
	resp.Body.Close()
	r.Settings = ms(time.Since(t0))
	if resp.StatusCode != http.StatusOK {
		return r, fmt.Errorf("claim settings answered %s", resp.Status)
	}
	if err := <-probed; err != nil {
		return r, fmt.Errorf("probe: %w", err)
	}
	r.Accepted = ms(time.Since(t0))
	started, ended, err := run(ctx, procs, token)
	if err != nil {
		return r, err
	}
	r.FirstStarted, r.FirstEnded = ms(started), ms(ended)
	started, ended, err = run(ctx, procs, token)
	r.Second = ms(ended)
	_ = started
	return r, err
}

// run is commands.run('true'): /bin/bash -l -c true through Process/Start; it returns when the
// start and end events arrived.
func run(ctx context.Context, procs processpbconnect.ProcessClient, token string) (started, ended time.Duration, err error) {
	req := connect.NewRequest(&pb.StartRequest{Process: &pb.ProcessConfig{Cmd: "/bin/bash", Args: []string{"-l", "-c", "true"}}, Stdin: ptr.To(false)})
	req.Header().Set(e2b.AccessTokenHeader, token)
	t0 := time.Now()
	stream, err := procs.Start(ctx, req)
	if err != nil {
		return 0, 0, err
	}
	defer stream.Close()
	for stream.Receive() {
		ev := stream.Msg().GetEvent()
		switch {
		case ev.GetStart() != nil:
			started = time.Since(t0)
		case ev.GetEnd() != nil:
			ended = time.Since(t0)
			if ev.GetEnd().GetExitCode() != 0 {
				return started, ended, fmt.Errorf("true exited %d", ev.GetEnd().GetExitCode())
			}
		}
	}
	if ended == 0 {
		return started, ended, errors.Join(errors.New("no end event"), stream.Err())
	}
	return started, ended, nil
}
