package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/paddock-dev/paddock/internal/router/headers"
)

// errPolicy marks a dial the router refused because the address is not a sandbox address
// (loopback, link-local, multicast, unspecified), whatever name resolved to it.
var errPolicy = errors.New("address refused by router policy (loopback, link-local, multicast or unspecified)")

// DefaultIdleConnsPerHost is how many keep-alive connections the router keeps to one sandbox
// unless told otherwise. With more requests than this in flight to one sandbox, each extra
// request opens a connection and closes it afterwards, which costs a TCP handshake and leaves a
// socket in TIME_WAIT; 64 covers the concurrency of a busy agent or evaluation worker.
const DefaultIdleConnsPerHost = 64

// NewTransport returns the upstream transport: HTTP/1.1, no environment proxy, and a dialer
// that checks every address it connects to, so a DNS name cannot lead to the metadata service.
// It keeps up to idlePerHost idle connections to each sandbox (DefaultIdleConnsPerHost when 0).
func NewTransport(p headers.Policy, dialTimeout, responseHeaderTimeout time.Duration, idlePerHost int) *http.Transport {
	if idlePerHost <= 0 {
		idlePerHost = DefaultIdleConnsPerHost
	}
	d := &net.Dialer{
		Timeout:   dialTimeout,
		KeepAlive: 30 * time.Second,
		Control: func(_, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil || !headers.Dialable(ap.Addr(), p) {
				return fmt.Errorf("dial %s: %w", address, errPolicy)
			}
			return nil
		},
	}
	return &http.Transport{
		Proxy:                 nil,
		DialContext:           d.DialContext,
		ForceAttemptHTTP2:     false,
		MaxIdleConns:          max(1024, 4*idlePerHost),
		MaxIdleConnsPerHost:   idlePerHost,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
		ResponseHeaderTimeout: responseHeaderTimeout,
	}
}

// RetryPolicy bounds retries of failed dials.
type RetryPolicy struct {
	// Max is the number of retries after the first attempt; 0 disables retries.
	Max          int
	InitialDelay time.Duration
	MaxDelay     time.Duration
}

// retryTransport repeats a request only when repeating cannot duplicate its effect: the method
// is idempotent, there is no body to replay, and the attempt failed while dialling, so no byte
// reached the upstream.
type retryTransport struct {
	base    http.RoundTripper
	policy  RetryPolicy
	onRetry func(*http.Request)
}

func (t *retryTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	delay := t.policy.InitialDelay
	for attempt := 0; ; attempt++ {
		resp, err := t.base.RoundTrip(req)
		if err == nil || attempt >= t.policy.Max || !Retriable(req, err) {
			return resp, err
		}
		timer := time.NewTimer(delay)
		select {
		case <-req.Context().Done():
			timer.Stop()
			return nil, err
		case <-timer.C:
		}
		if t.onRetry != nil {
			t.onRetry(req)
		}
		delay = min(2*delay, t.policy.MaxDelay)
	}
}

// Retriable reports whether a failed attempt of req may be repeated.
func Retriable(req *http.Request, err error) bool {
	if !idempotent(req.Method) || (req.Body != nil && req.Body != http.NoBody) || errors.Is(err, errPolicy) {
		return false
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return !dnsErr.IsNotFound || dnsErr.IsTemporary
	}
	var opErr *net.OpError
	return errors.As(err, &opErr) && opErr.Op == "dial"
}

func idempotent(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, http.MethodPut, http.MethodDelete:
		return true
	}
	return false
}

// Classify names the cause of an upstream failure with a bounded word.
func Classify(err error) string {
	var opErr *net.OpError
	var netErr net.Error
	switch {
	case errors.Is(err, errPolicy):
		return "policy"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded),
		errors.As(err, &netErr) && netErr.Timeout():
		return "timeout"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "refused"
	case errors.As(err, &opErr) && opErr.Op == "dial", isDNS(err):
		return "dial"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNRESET):
		return "eof"
	case strings.Contains(err.Error(), "tls"):
		return "tls"
	}
	return "other"
}

func isDNS(err error) bool {
	var dnsErr *net.DNSError
	return errors.As(err, &dnsErr)
}
