package sandboxdclient

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	"github.com/paddock-dev/paddock/api/sandboxd"
	"github.com/paddock-dev/paddock/internal/sandboxd/claim"
)

// ErrBoundElsewhere is sandboxd's 409 to claim settings: it is bound to another claim already.
var ErrBoundElsewhere = errors.New("sandboxd is bound to another claim")

// PutClaimSettings binds sb's sandboxd to the claim s names, with its env and files, which
// unlocks a member that started locked. Sending the same claim again is harmless; a 409 is
// ErrBoundElsewhere.
func (c *Client) PutClaimSettings(ctx context.Context, sb *agentsv1beta1.Sandbox, s claim.Settings) error {
	err := c.do(ctx, sb, call{method: http.MethodPut, path: sandboxd.ClaimSettingsPath, in: s})
	if statusCode(err) == http.StatusConflict {
		return fmt.Errorf("%w: %w", ErrBoundElsewhere, err)
	}
	return err
}

// ClaimSettings asks sb's sandboxd which claim it is bound to; a 404 means none yet.
func (c *Client) ClaimSettings(ctx context.Context, sb *agentsv1beta1.Sandbox) (claim.Status, error) {
	var st claim.Status
	err := c.do(ctx, sb, call{method: http.MethodGet, path: sandboxd.ClaimSettingsPath, out: &st})
	return st, err
}
