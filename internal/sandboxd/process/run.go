package process

import (
	"bytes"
	"context"
	"fmt"
)

// ErrOutputLimit is returned by Run when a stream exceeds its limit; the process group is killed.
type ErrOutputLimit struct {
	Stream string
	Limit  int
}

func (e *ErrOutputLimit) Error() string {
	return fmt.Sprintf("%s exceeded %d bytes, so the process was killed; stream large output with Start instead", e.Stream, e.Limit)
}

// Result is the outcome of Run.
type Result struct {
	ExitCode       int
	Stdout, Stderr []byte
}

// Run runs spec to completion and buffers its output, at most limit bytes per stream (no limit
// when limit <= 0). The process is registered while it runs, so Shutdown stops it too.
func (m *Manager) Run(ctx context.Context, spec Spec, limit int) (Result, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	p, err := m.Start(ctx, spec)
	if err != nil {
		return Result{}, err
	}
	defer m.Release(p)
	var stdout, stderr bytes.Buffer
	var overflow error
	for chunk := range p.Output() {
		buf, name := &stdout, "stdout"
		if chunk.Stream == Stderr {
			buf, name = &stderr, "stderr"
		}
		if overflow != nil {
			continue // keep draining so the process is reaped
		}
		if limit > 0 && buf.Len()+len(chunk.Data) > limit {
			overflow = &ErrOutputLimit{Stream: name, Limit: limit}
			cancel()
			continue
		}
		buf.Write(chunk.Data)
	}
	code := p.Wait()
	if overflow != nil {
		return Result{}, overflow
	}
	return Result{ExitCode: code, Stdout: stdout.Bytes(), Stderr: stderr.Bytes()}, nil
}
