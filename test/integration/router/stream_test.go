package router

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/websocket"

	"github.com/paddock-dev/paddock/internal/router"
	"github.com/paddock-dev/paddock/test/builder"
	"github.com/paddock-dev/paddock/test/framework"
)

// TestStreamedResponseFlowsChunkByChunk proves the router forwards each chunk as it comes: the
// upstream writes the next chunk only after the client has read the previous one through the
// router, so any buffering would deadlock the test until its deadline.
func TestStreamedResponseFlowsChunkByChunk(t *testing.T) {
	// Server-sent events and a plain chunked body: both must be flushed write by write.
	for i, contentType := range []string{"text/event-stream", "application/octet-stream"} {
		t.Run(contentType, func(t *testing.T) { streamThrough(t, contentType, fmt.Sprintf("127.0.0.%d", 13+i)) })
	}
}

func streamThrough(t *testing.T, contentType, podIP string) {
	ns := env.Namespace(t)
	next := make(chan struct{})
	const chunks = 5
	port := upstreams(t, map[string]http.Handler{podIP: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", contentType)
		for i := range chunks {
			fmt.Fprintf(w, "data: chunk %d\n\n", i)
			_ = http.NewResponseController(w).Flush()
			select {
			case <-next:
			case <-r.Context().Done():
				return
			}
		}
	})})
	createSandbox(t, builder.MakeSandbox("streamer", ns).Port("http", int32(port)).ReadyStatus(podIP))
	r := startRouter(t, nil)

	ctx := framework.Context(t, time.Minute)
	var resp *http.Response
	framework.Eventually(t, func(context.Context) error {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, r.proxyURL+"/events", nil)
		req.Header.Set("X-Sandbox-ID", "streamer")
		req.Header.Set("X-Sandbox-Namespace", ns)
		req.Header.Set("X-Sandbox-Port", strconv.Itoa(port))
		var err error
		if resp, err = http.DefaultClient.Do(req); err != nil {
			return err
		}
		if resp.StatusCode != http.StatusOK {
			resp.Body.Close()
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return nil
	})
	defer resp.Body.Close()
	rd := bufio.NewReader(resp.Body)
	for i := range chunks {
		var got strings.Builder
		for range 2 {
			line, err := rd.ReadString('\n')
			if err != nil {
				t.Fatalf("reading chunk %d: %v", i, err)
			}
			got.WriteString(line)
		}
		if want := fmt.Sprintf("data: chunk %d\n\n", i); got.String() != want {
			t.Fatalf("chunk %d = %q, want %q", i, got.String(), want)
		}
		next <- struct{}{}
	}
	if rest, err := io.ReadAll(rd); err != nil || len(rest) != 0 {
		t.Errorf("after the last chunk: %q %v", rest, err)
	}
}

// TestWebSocketUpgradePassesThrough echoes messages over a WebSocket through the router, also
// after the router's proxy timeout has passed: upgraded connections are not bound by it.
func TestWebSocketUpgradePassesThrough(t *testing.T) {
	ns := env.Namespace(t)
	var sawOrigin, sawAuth string
	echo := websocket.Server{
		Handshake: func(_ *websocket.Config, r *http.Request) error {
			sawOrigin, sawAuth = r.Header.Get("Origin"), r.Header.Get("Authorization")
			return nil
		},
		Handler: func(c *websocket.Conn) { _, _ = io.Copy(c, c) },
	}
	port := upstreams(t, map[string]http.Handler{"127.0.0.8": echo})
	createSandbox(t, builder.MakeSandbox("ws", ns).Port("http", int32(port)).ReadyStatus("127.0.0.8"))
	const proxyTimeout = 200 * time.Millisecond
	r := startRouter(t, func(c *router.Config) { c.ProxyTimeout = proxyTimeout })

	cfg, err := websocket.NewConfig("ws://"+strings.TrimPrefix(r.proxyURL, "http://")+"/ws", "http://browser.test")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Header = http.Header{"X-Sandbox-Id": {"ws"}, "X-Sandbox-Namespace": {ns},
		"X-Sandbox-Port": {strconv.Itoa(port)}, "Authorization": {"Bearer not-for-the-sandbox"}}
	var conn *websocket.Conn
	framework.Eventually(t, func(context.Context) error {
		conn, err = websocket.DialConfig(cfg)
		return err
	})
	defer conn.Close()
	opened := time.Now()
	exchange := func(msg string) {
		t.Helper()
		if err := websocket.Message.Send(conn, msg); err != nil {
			t.Fatalf("send %q: %v", msg, err)
		}
		var got string
		if err := websocket.Message.Receive(conn, &got); err != nil {
			t.Fatalf("receive: %v", err)
		}
		if got != msg {
			t.Fatalf("echo = %q, want %q", got, msg)
		}
	}
	exchange("hello")
	// Wait (polling a clock, with a deadline) until the proxy timeout is behind us.
	framework.Eventually(t, func(context.Context) error {
		if time.Since(opened) <= 2*proxyTimeout {
			return fmt.Errorf("proxy timeout not passed yet")
		}
		return nil
	})
	exchange("still open after the proxy timeout")
	if sawOrigin != "" || sawAuth != "" {
		t.Errorf("upstream saw Origin %q and Authorization %q; both must be stripped on upgrades", sawOrigin, sawAuth)
	}
}
