package devcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/paddock-dev/paddock/internal/procstat"
)

// A process is one component running in the background. Its pid file holds the pid and the
// process's start time (in clock ticks since boot), so a recycled pid is never mistaken for it.
type process struct {
	name    string
	pidFile string
	logFile string
}

func (c Config) process(name string) process {
	return process{name: name, pidFile: c.path("run", name+".pid"), logFile: c.path("logs", name+".log")}
}

// start runs binary with args in a session of its own, with stdout and stderr appended to the
// component's log, and records its pid. The process outlives the command that started it.
func (p process) start(binary string, args []string, env []string) (int, error) {
	return p.startWith(binary, args, env, 0)
}

// startWith is start with extra clone flags: CLONE_NEWNET starts the process in a network
// namespace of its own, which it holds for as long as it runs.
func (p process) startWith(binary string, args []string, env []string, cloneflags uintptr) (int, error) {
	for _, dir := range []string{filepath.Dir(p.pidFile), filepath.Dir(p.logFile)} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return 0, err
		}
	}
	log, err := os.OpenFile(p.logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return 0, err
	}
	defer log.Close()
	fmt.Fprintf(log, "==== %s: %s %s\n", time.Now().UTC().Format(time.RFC3339), binary, strings.Join(args, " "))
	cmd := exec.Command(binary, args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Cloneflags: cloneflags}
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("start %s (%s): %w", p.name, binary, err)
	}
	pid := cmd.Process.Pid
	started, err := startTime(pid)
	if err != nil {
		return 0, fmt.Errorf("%s exited at once:\n%s", p.name, p.tail(20))
	}
	if err := os.WriteFile(p.pidFile, []byte(fmt.Sprintf("%d %d\n", pid, started)), 0o644); err != nil {
		return 0, err
	}
	// Reap the child if it dies while this command still runs, so liveness checks see it gone.
	go func() { _ = cmd.Wait() }()
	return pid, nil
}

// pid returns the recorded pid when that process is still alive, else 0.
func (p process) pid() int {
	data, err := os.ReadFile(p.pidFile)
	if err != nil {
		return 0
	}
	fields := strings.Fields(string(data))
	if len(fields) != 2 {
		return 0
	}
	pid, err1 := strconv.Atoi(fields[0])
	want, err2 := strconv.ParseUint(fields[1], 10, 64)
	if err1 != nil || err2 != nil {
		return 0
	}
	if got, err := startTime(pid); err != nil || got != want {
		return 0
	}
	return pid
}

// startedAt is when the recorded process was started (the pid file's time); zero if unknown.
func (p process) startedAt() time.Time {
	info, err := os.Stat(p.pidFile)
	if err != nil {
		return time.Time{}
	}
	return info.ModTime()
}

// stop sends SIGTERM to the component's process group, waits up to grace for it to exit, then
// kills the group. It removes the pid file. A component that is not running is not an error.
func (p process) stop(ctx context.Context, grace time.Duration) error {
	pid := p.pid()
	if pid != 0 {
		_ = syscall.Kill(-pid, syscall.SIGTERM)
		if !waitGone(ctx, pid, grace) {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
			if !waitGone(ctx, pid, 5*time.Second) {
				return fmt.Errorf("%s (pid %d) did not exit after SIGKILL", p.name, pid)
			}
		}
	}
	if err := os.Remove(p.pidFile); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

func waitGone(ctx context.Context, pid int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if _, err := startTime(pid); err != nil {
			return true
		}
		time.Sleep(50 * time.Millisecond)
	}
	_, err := startTime(pid)
	return err != nil
}

// tail returns the last n lines of the component's log.
func (p process) tail(n int) string { return tailFile(p.logFile, n) }

func tailFile(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	lines := bytes.Split(bytes.TrimRight(data, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "    " + string(bytes.Join(lines, []byte("\n    ")))
}

// startTime returns the start time of a live (not zombie) process, field 22 of /proc/PID/stat.
func startTime(pid int) (uint64, error) {
	st, err := procstat.Read("/proc", pid)
	if err != nil {
		return 0, err
	}
	if !st.Running() {
		return 0, fmt.Errorf("process %d is not running", pid)
	}
	return st.Start, nil
}
