package sandboxclaim

import (
	"errors"
	"fmt"
	"time"

	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
	"github.com/paddock-dev/paddock/internal/blueprint"
)

// Kinds of claim errors; match them with errors.Is.
var (
	errWarmPoolNotFound = errors.New("warm pool not found")
	errTemplateNotFound = errors.New("template not found")
	errCreatePending    = errors.New("sandbox create pending")
	errNotControlled    = errors.New("sandbox not controlled by claim")
)

// claimError is an error of a known kind whose message is meant for the claim's status.
type claimError struct {
	kind error
	msg  string
}

func (e *claimError) Error() string { return e.msg }
func (e *claimError) Unwrap() error { return e.kind }

func newError(kind error, format string, args ...any) error {
	return &claimError{kind: kind, msg: fmt.Sprintf(format, args...)}
}

// reasonFor maps an error of a pass to the claim's Ready reason and message.
func reasonFor(err error) (reason, message string) {
	var settings *settingsError
	switch {
	case errors.As(err, &settings):
		return settings.reason, settings.msg
	case errors.Is(err, errWarmPoolNotFound):
		return extensionsv1beta1.ClaimReasonWarmPoolNotFound, err.Error()
	case errors.Is(err, errTemplateNotFound):
		return extensionsv1beta1.ClaimReasonTemplateNotFound, err.Error()
	case errors.Is(err, errCreatePending):
		return extensionsv1beta1.ClaimReasonSandboxCreatePending, err.Error()
	case errors.Is(err, blueprint.ErrInvalidMetadata):
		return extensionsv1beta1.ClaimReasonInvalidMetadata, err.Error()
	case errors.Is(err, blueprint.ErrEnvInjectionRejected):
		return extensionsv1beta1.ClaimReasonEnvVarsInjectionRejected, err.Error()
	case errors.Is(err, blueprint.ErrVolumeClaimTemplates):
		return extensionsv1beta1.ClaimReasonVolumeClaimTemplatesError, err.Error()
	default:
		return extensionsv1beta1.ClaimReasonReconcilerError, fmt.Sprintf("Error seen: %v", err)
	}
}

// suppressed errors wait for the user to change something: retrying with backoff cannot help,
// and the claim's watch brings the next pass when they do.
func suppressed(err error) bool {
	for _, target := range []error{blueprint.ErrInvalidMetadata, blueprint.ErrEnvInjectionRejected,
		blueprint.ErrVolumeClaimTemplates, errNotControlled} {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}

// warmWait is not a failure: a warm member is about to be networked and the claim waits for it
// briefly, without a status write, instead of starting cold.
type warmWait struct{ retryAfter time.Duration }

func (w *warmWait) Error() string {
	return fmt.Sprintf("waiting %s for a warm member to get its IP", w.retryAfter)
}
