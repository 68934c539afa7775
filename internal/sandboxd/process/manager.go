package process

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"syscall"
	"time"
)

// ErrNotFound is returned for a process id that is unknown or whose Start call has ended.
var ErrNotFound = errors.New("process not found")

// TooManyProcessesError is returned by Start when the manager already runs its maximum number of
// processes.
type TooManyProcessesError struct{ Max int }

func (e *TooManyProcessesError) Error() string {
	return fmt.Sprintf("too many processes: sandboxd already runs %d commands (--max-processes); wait for one to exit or raise the limit", e.Max)
}

// shutdownGrace is how long Shutdown waits after SIGTERM before it sends SIGKILL.
const shutdownGrace = 2 * time.Second

// Manager starts processes and keeps those that clients may address by id.
type Manager struct {
	chunkSize int

	mu       sync.Mutex
	nextID   int32
	procs    map[int32]*Process
	max      int // 0: no limit
	starting int // slots taken by Start calls that have not registered their process yet
}

// SetMaxProcesses limits how many processes may be registered at once (0, the default: no
// limit). It bounds the commands clients start, not their descendants; the pod's PID limit
// bounds those.
func (m *Manager) SetMaxProcesses(n int) {
	m.mu.Lock()
	m.max = n
	m.mu.Unlock()
}

// NewManager returns a Manager whose output chunks are at most chunkSize bytes (4096 when <= 0).
func NewManager(chunkSize int) *Manager {
	if chunkSize <= 0 {
		chunkSize = 4096
	}
	return &Manager{chunkSize: chunkSize, procs: map[int32]*Process{}}
}

// Start starts spec and registers it under a new id before returning, so the id is usable as
// soon as the caller learns it. Cancelling ctx kills the process group. The caller must drain
// Output and call Release when it no longer needs the id.
func (m *Manager) Start(ctx context.Context, spec Spec) (*Process, error) {
	m.mu.Lock()
	if m.max > 0 && len(m.procs)+m.starting >= m.max {
		m.mu.Unlock()
		return nil, &TooManyProcessesError{Max: m.max}
	}
	m.starting++
	m.mu.Unlock()
	p, err := start(ctx, spec, m.chunkSize)
	m.mu.Lock()
	m.starting--
	if err != nil {
		m.mu.Unlock()
		return nil, err
	}
	m.nextID++
	p.id = m.nextID
	m.procs[p.id] = p
	m.mu.Unlock()
	return p, nil
}

// Get returns the registered process with the given id.
func (m *Manager) Get(id int32) (*Process, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p, ok := m.procs[id]
	if !ok {
		return nil, fmt.Errorf("process %d: %w", id, ErrNotFound)
	}
	return p, nil
}

// Release forgets a process id; later calls with it get ErrNotFound.
func (m *Manager) Release(p *Process) {
	m.mu.Lock()
	delete(m.procs, p.id)
	m.mu.Unlock()
}

// Running returns the number of registered processes that have not exited.
func (m *Manager) Running() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, p := range m.procs {
		if !p.Exited() {
			n++
		}
	}
	return n
}

// Shutdown sends SIGTERM to every registered process group, waits until they exit, ctx ends or
// shutdownGrace passes, then SIGKILLs the groups still alive.
func (m *Manager) Shutdown(ctx context.Context) {
	m.mu.Lock()
	procs := make([]*Process, 0, len(m.procs))
	for _, p := range m.procs {
		procs = append(procs, p)
	}
	m.mu.Unlock()
	for _, p := range procs {
		_ = p.Signal(syscall.SIGTERM)
	}
	grace, cancel := context.WithTimeout(ctx, shutdownGrace)
	defer cancel()
	for _, p := range procs {
		select {
		case <-p.done:
		case <-grace.Done():
		}
	}
	for _, p := range procs {
		_ = p.Signal(syscall.SIGKILL)
	}
}
