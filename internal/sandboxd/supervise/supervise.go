// Package supervise runs a container's own command as a service under sandboxd, for images that
// sandboxd was injected into (docs/byo-image.md): the service starts with sandboxd's scrubbed
// environment, in sandboxd's working directory, with its stdio; it is restarted with a backoff
// when it exits (per the restart policy), receives the signals sandboxd forwards, and is stopped
// with sandboxd, so its lifetime is the container's.
package supervise

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"k8s.io/klog/v2"
)

// Policy says when an exited service is started again.
type Policy string

// Restart policies, as the --service-restart flag spells them.
const (
	// Always restarts the service whatever its exit, like a Pod's restartPolicy Always.
	Always Policy = "always"
	// OnFailure restarts it after a non-zero exit or a signal.
	OnFailure Policy = "on-failure"
	// Never leaves it stopped; sandboxd keeps serving.
	Never Policy = "never"
)

// ParsePolicy reads a policy name.
func ParsePolicy(s string) (Policy, error) {
	switch p := Policy(s); p {
	case Always, OnFailure, Never:
		return p, nil
	}
	return "", fmt.Errorf("restart policy %q is not one of %s, %s, %s", s, Always, OnFailure, Never)
}

// Config describes the service.
type Config struct {
	// Argv is the command and its arguments; Argv[0] is looked up in the PATH of Env.
	Argv []string
	// Env is the service's environment ("K=V"); it must not hold sandboxd's tokens.
	Env []string
	// Dir is its working directory; empty keeps sandboxd's.
	Dir string
	// Stdin, Stdout and Stderr are its stdio (sandboxd's own in a container).
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	Restart        Policy
	// Backoff is the first delay before a restart (1s when zero); it doubles after each quick
	// exit up to MaxBackoff (1m when zero) and starts over once a run lasted MaxBackoff.
	Backoff, MaxBackoff time.Duration
}

// Status is what the supervisor knows about the service.
type Status struct {
	// Running is true while a run of the service is alive; PID is its process id.
	Running bool
	PID     int
	// Starts counts the runs started, the first included.
	Starts int
	// LastExit describes how the last run ended ("exit status 1", "signal: terminated"); empty
	// before the first ends.
	LastExit string
}

// Service is a supervised command. Build it with Start.
type Service struct {
	cfg  Config
	stop chan struct{}
	done chan struct{}

	mu     sync.Mutex
	cmd    *exec.Cmd
	status Status
	// changed is closed and replaced whenever status changes, so tests and callers can wait.
	changed chan struct{}
}

// Start starts the service's first run and supervises it until Stop.
func Start(cfg Config) (*Service, error) {
	if len(cfg.Argv) == 0 {
		return nil, errors.New("no service command")
	}
	if cfg.Restart == "" {
		cfg.Restart = Always
	}
	if cfg.Backoff <= 0 {
		cfg.Backoff = time.Second
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = time.Minute
	}
	s := &Service{cfg: cfg, stop: make(chan struct{}), done: make(chan struct{}), changed: make(chan struct{})}
	go s.loop()
	return s, nil
}

// loop runs the service until it may not restart or Stop is called.
func (s *Service) loop() {
	defer close(s.done)
	delay := s.cfg.Backoff
	for {
		started := time.Now()
		err := s.runOnce()
		ran := time.Since(started)
		if s.stopping() {
			return
		}
		if !s.restart(err) {
			klog.InfoS("Service exited; not restarting it", "command", s.cfg.Argv[0], "exit", describe(err), "restartPolicy", s.cfg.Restart)
			return
		}
		if ran >= s.cfg.MaxBackoff {
			delay = s.cfg.Backoff
		}
		klog.InfoS("Service exited; restarting it", "command", s.cfg.Argv[0], "exit", describe(err), "ran", ran.Round(time.Millisecond), "restartIn", delay)
		select {
		case <-s.stop:
			return
		case <-time.After(delay):
		}
		delay = min(2*delay, s.cfg.MaxBackoff)
	}
}

// runOnce starts one run and waits for it. A command that cannot start counts as a failed run.
func (s *Service) runOnce() error {
	cmd := exec.Command(s.cfg.Argv[0], s.cfg.Argv[1:]...)
	cmd.Env, cmd.Dir = s.cfg.Env, s.cfg.Dir
	cmd.Stdin, cmd.Stdout, cmd.Stderr = s.cfg.Stdin, s.cfg.Stdout, s.cfg.Stderr
	// Its own process group, so a stop reaches what it started; killed if sandboxd dies, so it
	// never outlives the container's sandboxd.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	s.mu.Lock()
	if s.stoppingLocked() {
		s.mu.Unlock()
		return errors.New("stopped")
	}
	err := cmd.Start()
	s.status.Starts++
	if err == nil {
		s.cmd = cmd
		s.status.Running, s.status.PID = true, cmd.Process.Pid
	} else {
		s.status.LastExit = err.Error()
	}
	s.notifyLocked()
	s.mu.Unlock()
	if err != nil {
		klog.ErrorS(err, "Service could not start", "command", s.cfg.Argv[0])
		return err
	}
	klog.InfoS("Service started", "command", s.cfg.Argv[0], "pid", cmd.Process.Pid)
	err = cmd.Wait()
	s.mu.Lock()
	s.cmd = nil
	s.status.Running, s.status.PID, s.status.LastExit = false, 0, describe(err)
	s.notifyLocked()
	s.mu.Unlock()
	return err
}

func (s *Service) restart(err error) bool {
	switch s.cfg.Restart {
	case Always:
		return true
	case OnFailure:
		return err != nil
	}
	return false
}

func describe(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

// Signal forwards sig to the running service, as the container's main process would have
// received it; without a running service it does nothing.
func (s *Service) Signal(sig os.Signal) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return nil
	}
	return s.cmd.Process.Signal(sig)
}

// Stop forwards sig (SIGTERM from the kubelet) to the service, waits for it to exit until ctx
// ends, then kills its process group. No run starts after Stop.
func (s *Service) Stop(ctx context.Context, sig os.Signal) {
	s.mu.Lock()
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	cmd := s.cmd
	s.mu.Unlock()
	if cmd != nil {
		_ = cmd.Process.Signal(sig)
	}
	select {
	case <-s.done:
	case <-ctx.Done():
		if cmd != nil {
			klog.InfoS("Service did not stop in time; killing its process group", "command", s.cfg.Argv[0], "pid", cmd.Process.Pid)
		}
	}
	// Whatever the service left running in its group goes with it.
	if cmd != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	<-s.done
}

// Done is closed once the supervisor gave up the service: stopped, or exited under a policy
// that does not restart it.
func (s *Service) Done() <-chan struct{} { return s.done }

// Status returns the service's state and a channel closed at its next change.
func (s *Service) Status() (Status, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.status, s.changed
}

func (s *Service) stopping() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stoppingLocked()
}

func (s *Service) stoppingLocked() bool {
	select {
	case <-s.stop:
		return true
	default:
		return false
	}
}

func (s *Service) notifyLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}
