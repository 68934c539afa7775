package sandboxdclient

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"syscall"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	"github.com/paddock-dev/paddock/api/sandboxd"
	"github.com/paddock-dev/paddock/internal/credentials"
	"github.com/paddock-dev/paddock/internal/serviceports"
)

// Activity asks sb's sandboxd for its activity (the idle controller's ActivitySource). A Sandbox
// whose Pod does not declare the REST port (on a container or a sidecar), that has no pod IP,
// where nothing listens there, or where something answers 4xx that is not sandboxd, runs no
// daemon to ask: nil, nil. A daemon that refuses the control token or cannot answer is an error.
func (c *Client) Activity(ctx context.Context, sb *agentsv1beta1.Sandbox) (*sandboxd.Activity, error) {
	if !serviceports.DeclaresTCP(&sb.Spec.PodTemplate.Spec, c.port) {
		return nil, nil
	}
	var a sandboxd.Activity
	err := c.do(ctx, sb, call{method: http.MethodGet, path: sandboxd.ActivityPath, out: &a})
	code := statusCode(err)
	switch {
	case err == nil:
		return &a, nil
	case errors.Is(err, ErrNoAddress), errors.Is(err, syscall.ECONNREFUSED):
		return nil, nil
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		return nil, fmt.Errorf("sandboxd refused the control token (%w); check that Secret %s holds this Sandbox's tokens",
			err, credentials.SandboxSecretName(sb.Name))
	case code >= 400 && code < 500:
		return nil, nil // not sandboxd, or one too old to know activity
	case code != 0:
		return nil, fmt.Errorf("GET %s: %w", sandboxd.ActivityPath, err)
	}
	return nil, err
}
