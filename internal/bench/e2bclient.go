package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"connectrpc.com/connect"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/paddock-dev/paddock/api/e2b"
	pb "github.com/paddock-dev/paddock/api/proto/envd/process"
	"github.com/paddock-dev/paddock/api/proto/envd/process/processpbconnect"
)

// What the e2b SDK 2.51.0 sends (shared/reference/e2b.md §1.2-1.5) that the front door's wire
// types do not spell.
const (
	// e2bCreatePath is create since 2.51.0 (POST /sandboxes before).
	e2bCreatePath = "/v2/sandboxes"
	// e2bCommandTimeout is commands.run's default timeoutMs, sent as Connect-Timeout-Ms.
	e2bCommandTimeout = 60 * time.Second
	// keepaliveHeader asks envd for keepalive events on a stream every so many seconds.
	keepaliveHeader = "Keepalive-Ping-Interval"
	keepaliveValue  = "50"
	// e2bUserAgent says who sends; the SDK sends e2b-js-sdk/<version>.
	e2bUserAgent = "paddock-bench (e2b-js-sdk 2.51.0 wire)"
	// e2bShell is how commands.run runs a command: /bin/bash -l -c <cmd>.
	e2bShell = "/bin/bash"
)

// e2bClient sends E2B SDK requests to one front door with one API key: the control plane on url,
// and envd's Connect RPCs on the same url routed by headers (E2B_SANDBOX_URL mode).
type e2bClient struct {
	url, key string
	hc       *http.Client
	process  processpbconnect.ProcessClient
}

// newE2BClient keeps up to conns connections alive to the front door, one per concurrent
// create, and ignores proxy environment variables: the router is reached directly.
func newE2BClient(url, key string, conns int) *e2bClient {
	hc := &http.Client{Transport: &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        2 * max(conns, 1),
		MaxIdleConnsPerHost: 2 * max(conns, 1),
		IdleConnTimeout:     90 * time.Second,
	}}
	// JSON, never protobuf binary, and no compression: what connect-web in the SDK speaks.
	return &e2bClient{url: url, key: key, hc: hc, process: processpbconnect.NewProcessClient(hc, url,
		connect.WithProtoJSON(), connect.WithAcceptCompression("gzip", nil, nil))}
}

// apiError is a non-2xx control-plane answer with E2B's {"code","message"} body.
type apiError struct {
	status  int
	message string
}

func (e *apiError) Error() string { return fmt.Sprintf("%d: %s", e.status, e.message) }

// do sends one control-plane request with the key and, for a body, JSON; it returns the body of
// an answer with status want and an *apiError for any other.
func (c *e2bClient) do(ctx context.Context, method, path string, body any, want int) ([]byte, error) {
	out, _, err := c.doHeader(ctx, method, path, body, want)
	return out, err
}

// doHeader is do that also returns the answer's header.
func (c *e2bClient) doHeader(ctx context.Context, method, path string, body any, want int) ([]byte, http.Header, error) {
	var reader io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, nil, err
		}
		reader = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.url+path, reader)
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set(e2b.APIKeyHeader, c.key)
	req.Header.Set("User-Agent", e2bUserAgent)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, nil, err
	}
	if resp.StatusCode != want {
		e := &apiError{status: resp.StatusCode, message: string(out)}
		var body struct {
			Message string `json:"message"`
		}
		if json.Unmarshal(out, &body) == nil && body.Message != "" {
			e.message = body.Message
		}
		return nil, nil, e
	}
	return out, resp.Header, nil
}

// create is Sandbox.create(template, {metadata, timeoutMs}).
func (c *e2bClient) create(ctx context.Context, template string, metadata map[string]string, timeoutSeconds int64) (e2b.Sandbox, error) {
	sb, _, err := c.createWithSteps(ctx, template, metadata, timeoutSeconds)
	return sb, err
}

// createWithSteps is create that also returns the steps the front door's Server-Timing names.
func (c *e2bClient) createWithSteps(ctx context.Context, template string, metadata map[string]string, timeoutSeconds int64) (e2b.Sandbox, serverSteps, error) {
	var sb e2b.Sandbox
	body, header, err := c.doHeader(ctx, http.MethodPost, e2bCreatePath,
		e2b.CreateRequest{TemplateID: template, Metadata: metadata, Timeout: &timeoutSeconds}, http.StatusCreated)
	if err != nil {
		return sb, nil, err
	}
	steps := parseServerTiming(header.Values("Server-Timing"))
	if err := json.Unmarshal(body, &sb); err != nil {
		return sb, nil, fmt.Errorf("the create answer is not E2B's Sandbox: %w", err)
	}
	if sb.SandboxID == "" {
		return sb, nil, errors.New("the create answer has no sandboxID")
	}
	return sb, steps, nil
}

// list is Sandbox.list({limit: 1}).nextItems(): one page.
func (c *e2bClient) list(ctx context.Context) error {
	_, err := c.do(ctx, http.MethodGet, e2bCreatePath+"?limit=1", nil, http.StatusOK)
	return err
}

// kill is Sandbox.kill(id): true on 204, false on 404.
func (c *e2bClient) kill(ctx context.Context, id string) (bool, error) {
	_, err := c.do(ctx, http.MethodDelete, "/sandboxes/"+id, nil, http.StatusNoContent)
	var ae *apiError
	if errors.As(err, &ae) && ae.status == http.StatusNotFound {
		return false, nil
	}
	return err == nil, err
}

// killAll kills every sandbox the samples created, a few at a time, logging what it could not.
func (c *e2bClient) killAll(ctx context.Context, samples []e2bSample) {
	ids := make(chan string)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for id := range ids {
				if _, err := c.kill(ctx, id); err != nil {
					klog.FromContext(ctx).Error(err, "Killing an E2B sandbox of the scenario", "sandbox", id)
				}
			}
		})
	}
	for _, smp := range samples {
		if smp.id != "" {
			ids <- smp.id
		}
	}
	close(ids)
	wg.Wait()
}

// startRequest is what commands.run(cmd) sends to envd's Process/Start.
func startRequest(sb e2b.Sandbox, cmd string) *connect.Request[pb.StartRequest] {
	req := connect.NewRequest(&pb.StartRequest{
		Process: &pb.ProcessConfig{Cmd: e2bShell, Args: []string{"-l", "-c", cmd}},
		Stdin:   ptr.To(false),
	})
	h := req.Header()
	h.Set(e2b.SandboxIDHeader, sb.SandboxID)
	h.Set(e2b.SandboxPortHeader, strconv.Itoa(e2b.EnvdPort))
	if sb.EnvdAccessToken != "" {
		h.Set(e2b.AccessTokenHeader, sb.EnvdAccessToken)
	}
	h.Set(keepaliveHeader, keepaliveValue)
	h.Set("User-Agent", e2bUserAgent)
	return req
}

// run is sandbox.commands.run(cmd) in the foreground: the stream must open with a start event,
// carry an end event whose exit code is 0, and close with Connect's end-stream frame, which the
// SDK reads too.
func (c *e2bClient) run(ctx context.Context, sb e2b.Sandbox, cmd string) error {
	_, err := c.runTimed(ctx, sb, cmd)
	return err
}

// runTimes are the moments of one run, since it was called: the start event (the daemon started
// the process) and the end event (it exited).
type runTimes struct{ started, ended time.Duration }

// runTimed is run that also says when the start and end events arrived.
func (c *e2bClient) runTimed(ctx context.Context, sb e2b.Sandbox, cmd string) (runTimes, error) {
	var times runTimes
	t0 := time.Now()
	ctx, cancel := context.WithTimeout(ctx, e2bCommandTimeout)
	defer cancel()
	stream, err := c.process.Start(ctx, startRequest(sb, cmd))
	if err != nil {
		return times, err
	}
	defer stream.Close()
	started := false
	var end *pb.ProcessEvent_EndEvent
	for stream.Receive() {
		ev := stream.Msg().GetEvent()
		switch {
		case !started && ev.GetStart() == nil:
			return times, errors.New("expected start event")
		case !started:
			started, times.started = true, time.Since(t0)
		case ev.GetEnd() != nil:
			end, times.ended = ev.GetEnd(), time.Since(t0)
		}
	}
	switch {
	case stream.Err() != nil:
		return times, stream.Err()
	case end == nil:
		return times, errors.New("the stream ended without an end event")
	case end.GetExitCode() != 0 || end.Error != nil:
		return times, fmt.Errorf("%q exited with %d (%s %s)", cmd, end.GetExitCode(), end.GetStatus(), end.GetError())
	}
	return times, nil
}
