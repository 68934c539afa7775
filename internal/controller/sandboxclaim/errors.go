package sandboxclaim

import (
	"errors"
	"fmt"
	"time"

	"github.com/paddock-dev/paddock/internal/blueprint"
)

// Kinds of claim errors; match them with errors.Is.
var (
	errWarmPoolNotFound = errors.New("warm pool not found")
	errTemplateNotFound = errors.New("template not found")
	errCreatePending    = errors.New("sandbox create pending")
	errNotControlled    = errors.New("sandbox not controlled by claim")
	errOutOfBounds      = errors.New("claim resources out of bounds")
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

// settingsError is a pass that could not deliver a claim's settings; reason is the claim's Ready
// and SettingsDelivered reason.
type settingsError struct {
	reason string
	msg    string
}

func (e *settingsError) Error() string { return e.msg }

// resizeError is a pass whose warm Sandbox is not resized yet, or was given up; reason is the
// claim's Ready and Resized reason. giveUpIn is when a waiting claim gives up.
type resizeError struct {
	reason   string
	msg      string
	giveUpIn time.Duration
}

func (e *resizeError) Error() string { return e.msg }

// suppressed errors wait for the user to change something: retrying with backoff cannot help,
// and the claim's watch brings the next pass when they do.
func suppressed(err error) bool {
	for _, target := range []error{blueprint.ErrInvalidMetadata, blueprint.ErrEnvInjectionRejected,
		blueprint.ErrVolumeClaimTemplates, errNotControlled, errOutOfBounds} {
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
