package sandboxdclient

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	"github.com/paddock-dev/paddock/api/sandboxd"
	"github.com/paddock-dev/paddock/internal/credentials"
)

// DefaultTimeout bounds one call of a client built without an HTTP client of its own.
const DefaultTimeout = 5 * time.Second

// What the client reads of an answer at most.
const (
	maxAnswer  = 64 << 10 // a 200 answer's body
	maxMessage = 4 << 10  // the message of any other answer
)

// ErrNoAddress is a call for a Sandbox that has no pod IP yet.
var ErrNoAddress = errors.New("no pod IP yet")

// Options configure a Client; the zero value is a client that sends no token.
type Options struct {
	// Key is the installation's credentials key, from which each Sandbox's control token is
	// derived; nil sends no token.
	Key []byte
	// Port is sandboxd's REST port in the Pod (default sandboxd.RESTPort). Tests set the port of
	// a sandboxd on loopback.
	Port int
	// Address, when set, replaces the default address (first pod IP and Port): tests resolve to
	// a sandboxd on loopback, since a Pod IP in a test API server reaches nothing.
	Address func(*agentsv1beta1.Sandbox) (string, error)
	// HTTPClient sends the requests; the default ignores proxy settings and gives up after
	// DefaultTimeout.
	HTTPClient *http.Client
}

// Client calls sandboxd in Sandboxes' Pods. It is safe for concurrent use.
type Client struct {
	key     []byte
	port    int
	address func(*agentsv1beta1.Sandbox) (string, error)
	http    *http.Client
}

// New returns a Client; zero options take their defaults.
func New(o Options) *Client {
	c := &Client{key: o.Key, port: cmp.Or(o.Port, sandboxd.RESTPort), address: o.Address, http: o.HTTPClient}
	if c.address == nil {
		c.address = c.podAddress
	}
	if c.http == nil {
		// Straight to the Pod: a proxy from the controller's environment must not see the token.
		transport := http.DefaultTransport.(*http.Transport).Clone()
		transport.Proxy = nil
		c.http = &http.Client{Timeout: DefaultTimeout, Transport: transport}
	}
	return c
}

// podAddress is sandboxd's REST address in the Sandbox's Pod.
func (c *Client) podAddress(sb *agentsv1beta1.Sandbox) (string, error) {
	if len(sb.Status.PodIPs) == 0 {
		return "", fmt.Errorf("sandbox %q has %w", sb.Name, ErrNoAddress)
	}
	return net.JoinHostPort(sb.Status.PodIPs[0], strconv.Itoa(c.port)), nil
}

// call is one request of the protocol.
type call struct {
	method, path string
	// in is sent as the JSON body; nil sends none.
	in any
	// out receives a 200 answer's JSON body; nil discards it.
	out any
}

// do sends k to sb's sandboxd with sb's control token and reads the answer.
func (c *Client) do(ctx context.Context, sb *agentsv1beta1.Sandbox, k call) error {
	addr, err := c.address(sb)
	if err != nil {
		return err
	}
	var body io.Reader
	if k.in != nil {
		b, err := json.Marshal(k.in)
		if err != nil {
			return &requestError{err}
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, k.method, "http://"+addr+k.path, body)
	if err != nil {
		return &requestError{err}
	}
	if c.key != nil {
		req.Header.Set("Authorization", "Bearer "+credentials.ControlToken(c.key, sb.Namespace, sb.Name, sb.UID))
	}
	if k.in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		text, _ := io.ReadAll(io.LimitReader(resp.Body, maxMessage))
		return &StatusError{Code: resp.StatusCode, Status: resp.Status, Message: string(bytes.TrimSpace(text))}
	}
	answer := io.LimitReader(resp.Body, maxAnswer)
	if k.out == nil {
		_, _ = io.Copy(io.Discard, answer)
		return nil
	}
	if err := json.NewDecoder(answer).Decode(k.out); err != nil {
		return fmt.Errorf("%s %s: malformed answer: %w", k.method, k.path, err)
	}
	return nil
}

// StatusError is an answer of sandboxd other than 200.
type StatusError struct {
	// Code is the HTTP status code, Status its line ("409 Conflict").
	Code   int
	Status string
	// Message is the body sandboxd answered with, trimmed, at most 4 KiB.
	Message string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("sandboxd answered %s: %s", e.Status, e.Message)
}

// requestError is a request that could not be built.
type requestError struct{ err error }

func (e *requestError) Error() string { return e.err.Error() }
func (e *requestError) Unwrap() error { return e.err }

// Permanent reports whether sending the same request again cannot succeed: it could not be
// built, or sandboxd refused it (bad request, authentication, unknown path, conflict, too large).
// Anything else, an unreachable Pod or a sandboxd shutting down, may pass.
func Permanent(err error) bool {
	var req *requestError
	if errors.As(err, &req) {
		return true
	}
	var se *StatusError
	if !errors.As(err, &se) {
		return false
	}
	switch se.Code {
	case http.StatusBadRequest, http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound,
		http.StatusConflict, http.StatusRequestEntityTooLarge:
		return true
	}
	return false
}

// statusCode is the status sandboxd answered with; 0 when err is no answer of sandboxd.
func statusCode(err error) int {
	var se *StatusError
	if errors.As(err, &se) {
		return se.Code
	}
	return 0
}
