package idle

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	"github.com/paddock-dev/paddock/api/sandboxd"
	"github.com/paddock-dev/paddock/internal/credentials"
)

// queryTimeout bounds one activity query.
const queryTimeout = 5 * time.Second

// SandboxdSource asks sandboxd's REST API for its activity, with the Sandbox's control token.
type SandboxdSource struct {
	// Key derives the control token; nil sends none (a sandboxd run --allow-unauthenticated).
	Key []byte
	// Client is the HTTP client; nil uses one with queryTimeout.
	Client *http.Client
	// Port overrides sandboxd.RESTPort, for tests.
	Port int
}

// Activity asks the daemon of sb. A Sandbox whose pod template does not declare sandboxd's REST
// port, or where nothing listens there, or something that is not sandboxd answers, runs no daemon
// to ask: nil, nil. A daemon that refuses the control token or cannot answer is an error.
func (s *SandboxdSource) Activity(ctx context.Context, sb *agentsv1beta1.Sandbox) (*sandboxd.Activity, error) {
	port := s.Port
	if port == 0 {
		port = sandboxd.RESTPort
	}
	if !declaresPort(&sb.Spec.PodTemplate.Spec, port) || len(sb.Status.PodIPs) == 0 {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, queryTimeout)
	defer cancel()
	url := "http://" + net.JoinHostPort(sb.Status.PodIPs[0], strconv.Itoa(port)) + sandboxd.ActivityPath
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	if s.Key != nil {
		req.Header.Set("Authorization", "Bearer "+credentials.ControlToken(s.Key, sb.Namespace, sb.Name, sb.UID))
	}
	c := s.Client
	if c == nil {
		c = &http.Client{Timeout: queryTimeout}
	}
	resp, err := c.Do(req)
	if errors.Is(err, syscall.ECONNREFUSED) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return nil, fmt.Errorf("sandboxd refused the control token (%s); check that Secret %s holds this Sandbox's tokens",
			resp.Status, credentials.SandboxSecretName(sb.Name))
	case resp.StatusCode >= 400 && resp.StatusCode < 500:
		return nil, nil // not sandboxd, or one too old to know activity
	case resp.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("GET %s: %s", sandboxd.ActivityPath, resp.Status)
	}
	var a sandboxd.Activity
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<16)).Decode(&a); err != nil {
		return nil, fmt.Errorf("GET %s: malformed answer: %w", sandboxd.ActivityPath, err)
	}
	return &a, nil
}

func declaresPort(spec *corev1.PodSpec, port int) bool {
	for _, c := range spec.Containers {
		for _, p := range c.Ports {
			if int(p.ContainerPort) == port && (p.Protocol == "" || p.Protocol == corev1.ProtocolTCP) {
				return true
			}
		}
	}
	return false
}
