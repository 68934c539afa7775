package standin

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
)

// Client talks to a running stand-in through its control socket. Only root (the socket's
// owner) can: never a pod.
type Client struct {
	http *http.Client
}

// NewClient returns a client of the stand-in whose state directory is dir.
func NewClient(dir string) *Client {
	path := ControlSocketPath(dir)
	return &Client{http: &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", path)
		},
	}}}
}

// Healthy fails unless the stand-in serves.
func (c *Client) Healthy(ctx context.Context) error {
	return c.do(ctx, http.MethodGet, "/healthz", nil, nil)
}

// Plan returns the stand-in's addresses: the resolver and every host.
func (c *Client) Plan(ctx context.Context) (Plan, error) {
	var p Plan
	return p, c.do(ctx, http.MethodGet, "/plan", nil, &p)
}

// AddHost makes name (under .test) resolve and serve HTTP and HTTPS at once, and returns its
// address. Adding a name twice returns the same host.
func (c *Client) AddHost(ctx context.Context, name string) (Host, error) {
	var h Host
	return h, c.do(ctx, http.MethodPost, "/hosts", map[string]string{"name": name}, &h)
}

// Requests returns the requests host saw, oldest first (all hosts' when host is empty).
func (c *Client) Requests(ctx context.Context, host string) ([]Request, error) {
	var out []Request
	return out, c.do(ctx, http.MethodGet, "/requests?host="+url.QueryEscape(host), nil, &out)
}

func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://standin"+path, body)
	if err != nil {
		return err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("stand-in control socket: %w (is `paddock dev up` running the stand-in?)", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("stand-in %s %s: %s: %s", method, path, resp.Status, bytes.TrimSpace(data))
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(data, out)
}
