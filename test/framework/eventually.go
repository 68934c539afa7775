package framework

import (
	"context"
	"testing"
	"time"
)

// DefaultTimeout bounds how long a test waits for the system to reach a state. It is a deadline
// for correctness, not a performance threshold: tests never assert on how fast a state is reached.
const DefaultTimeout = 60 * time.Second

const pollInterval = 50 * time.Millisecond

// Eventually polls check until it returns nil and fails the test with the last error when
// DefaultTimeout passes first.
func Eventually(t testing.TB, check func(ctx context.Context) error) {
	t.Helper()
	EventuallyWithin(t, DefaultTimeout, check)
}

// EventuallyWithin is Eventually with an explicit deadline.
func EventuallyWithin(t testing.TB, timeout time.Duration, check func(ctx context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	ticker := time.NewTicker(pollInterval)
	defer ticker.Stop()
	var last error
	for {
		err := check(ctx)
		if err == nil {
			return
		}
		// A check cut short by the deadline says nothing new; report what it saw before.
		if last == nil || ctx.Err() == nil {
			last = err
		}
		select {
		case <-ctx.Done():
			t.Fatalf("condition not met within %s: %v", timeout, last)
		case <-ticker.C:
		}
	}
}
