package process

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

	"github.com/creack/pty"
)

// drainGrace bounds how long output is read after the process exits: a background grandchild
// that inherited stdout would otherwise hold the stream open forever.
const drainGrace = 5 * time.Second

// ptyEOF is the terminal's default VEOF character (Ctrl-D): closing stdin of a PTY process types
// it, as a person would, instead of closing the terminal and losing the output still to come.
const ptyEOF = 0x04

// Spec says what to run.
type Spec struct {
	// Command is argv; Command[0] is looked up in PATH unless it contains a slash.
	Command []string
	// Env is the complete environment ("K=V").
	Env []string
	// Dir is the absolute working directory.
	Dir string
	// PTY, when set, runs the command on a pseudo-terminal of that size (0 leaves it unset).
	PTY *Size
}

// Size is a terminal size.
type Size struct{ Cols, Rows uint16 }

// Stream names an output stream.
type Stream int

// The output streams of a process; a PTY merges both into Stdout.
const (
	Stdout Stream = iota + 1
	Stderr
)

// Chunk is one read of a process's output.
type Chunk struct {
	Stream Stream
	Data   []byte
}

// Process is a started command.
type Process struct {
	id     int32
	cmd    *exec.Cmd
	tty    *os.File // PTY master, nil without a PTY
	stdin  *os.File // write end of the stdin pipe, nil with a PTY
	output chan Chunk

	stdinMu sync.Mutex
	done    chan struct{} // closed once the process is reaped and its output channel closed
	code    int
}

// ID is the virtual process id, 0 for unregistered processes.
func (p *Process) ID() int32 { return p.id }

// Output delivers the output in order and is closed after the last chunk; the exit code is
// available once it is closed.
func (p *Process) Output() <-chan Chunk { return p.output }

// Wait blocks until the process has exited and its output is closed, and returns the exit code
// (-1 when a signal ended it).
func (p *Process) Wait() int {
	<-p.done
	return p.code
}

// State describes how the process ended ("exit status 3", "signal: killed"), once Wait has
// returned; before that it is empty.
func (p *Process) State() string {
	if !p.Exited() || p.cmd.ProcessState == nil {
		return ""
	}
	return p.cmd.ProcessState.String()
}

// Exited reports whether Wait would return at once.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func start(ctx context.Context, spec Spec, chunkSize int) (*Process, error) {
	if len(spec.Command) == 0 || spec.Command[0] == "" {
		return nil, errors.New("command is required")
	}
	cmd := exec.Command(spec.Command[0], spec.Command[1:]...)
	cmd.Env, cmd.Dir = spec.Env, spec.Dir
	p := &Process{cmd: cmd, output: make(chan Chunk, 16), done: make(chan struct{})}
	var readers []*os.File
	var streams []Stream
	if spec.PTY != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
		var size *pty.Winsize
		if spec.PTY.Cols > 0 && spec.PTY.Rows > 0 {
			size = &pty.Winsize{Cols: spec.PTY.Cols, Rows: spec.PTY.Rows}
		}
		tty, err := pty.StartWithAttrs(cmd, size, cmd.SysProcAttr)
		if err != nil {
			return nil, err
		}
		p.tty = tty
		readers, streams = []*os.File{tty}, []Stream{Stdout}
	} else {
		var err error
		readers, err = startPiped(cmd, p)
		if err != nil {
			return nil, err
		}
		streams = []Stream{Stdout, Stderr}
	}
	go p.supervise(ctx, readers, streams, chunkSize)
	return p, nil
}

// startPiped starts cmd in its own process group with fresh stdin/stdout/stderr pipes and
// returns the read ends of stdout and stderr.
func startPiped(cmd *exec.Cmd, p *Process) ([]*os.File, error) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var parent, child []*os.File
	closeAll := func(files []*os.File) {
		for _, f := range files {
			f.Close()
		}
	}
	for range 3 {
		r, w, err := os.Pipe()
		if err != nil {
			closeAll(parent)
			closeAll(child)
			return nil, err
		}
		if len(parent) == 0 { // stdin: the child reads, we write
			parent, child = append(parent, w), append(child, r)
			continue
		}
		parent, child = append(parent, r), append(child, w)
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = child[0], child[1], child[2]
	err := cmd.Start()
	closeAll(child) // the child has its copies; ours would keep the pipes from reaching EOF
	if err != nil {
		closeAll(parent)
		return nil, err
	}
	p.stdin = parent[0]
	return parent[1:], nil
}

// supervise copies output, reaps the process and kills its group when ctx ends first.
func (p *Process) supervise(ctx context.Context, readers []*os.File, streams []Stream, chunkSize int) {
	exited := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			_ = p.kill(syscall.SIGKILL) // best effort: the group may already be gone
		case <-exited:
		}
	}()
	var copying sync.WaitGroup
	for i, r := range readers {
		copying.Go(func() { p.copyOutput(r, streams[i], chunkSize) })
	}
	copied := make(chan struct{})
	go func() { copying.Wait(); close(copied) }()

	// The exit status is in ProcessState; a Wait error that leaves it nil is reported as -1.
	_ = p.cmd.Wait()
	close(exited)
	p.code = exitCode(p.cmd)
	select {
	case <-copied:
	case <-time.After(drainGrace):
		for _, r := range readers {
			r.Close() // unblocks the readers held open by a grandchild
		}
		<-copied
	}
	for _, r := range readers {
		r.Close()
	}
	if p.stdin != nil {
		p.stdinMu.Lock()
		p.stdin.Close()
		p.stdinMu.Unlock()
	}
	close(p.output)
	close(p.done)
}

func (p *Process) copyOutput(r io.Reader, stream Stream, chunkSize int) {
	for {
		buf := make([]byte, chunkSize)
		n, err := r.Read(buf)
		if n > 0 {
			p.output <- Chunk{Stream: stream, Data: buf[:n]}
		}
		if err != nil {
			return // EOF, or EIO from a PTY whose last slave closed
		}
	}
}

func exitCode(cmd *exec.Cmd) int {
	if cmd.ProcessState != nil {
		return cmd.ProcessState.ExitCode()
	}
	return -1
}

// WriteStdin writes data to the process's stdin (its terminal with a PTY).
func (p *Process) WriteStdin(data []byte) error {
	if len(data) == 0 {
		return nil
	}
	w, err := p.stdinWriter()
	if err != nil {
		return err
	}
	_, err = w.Write(data)
	return err
}

// CloseStdin ends the process's input: it closes the stdin pipe, or types Ctrl-D on a PTY.
func (p *Process) CloseStdin() error {
	if p.tty != nil {
		return p.WriteStdin([]byte{ptyEOF})
	}
	p.stdinMu.Lock()
	defer p.stdinMu.Unlock()
	err := p.stdin.Close()
	if errors.Is(err, os.ErrClosed) {
		return nil // already closed: closing twice is harmless
	}
	return err
}

func (p *Process) stdinWriter() (io.Writer, error) {
	if p.Exited() {
		return nil, errors.New("process has exited; its stdin is closed")
	}
	if p.tty != nil {
		return p.tty, nil
	}
	return p.stdin, nil
}

// Signal delivers sig to the process group, falling back to the process alone. Signalling a
// process that has exited is a no-op.
func (p *Process) Signal(sig syscall.Signal) error {
	if p.Exited() {
		return nil
	}
	return p.kill(sig)
}

func (p *Process) kill(sig syscall.Signal) error {
	pid := p.cmd.Process.Pid
	if err := syscall.Kill(-pid, sig); err == nil || !errors.Is(err, syscall.ESRCH) {
		return err
	}
	if err := syscall.Kill(pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	return nil
}

// ErrNoTTY is returned when resizing a process that has no terminal.
var ErrNoTTY = errors.New("process has no PTY; start it with a pty to resize it")

// Resize changes the terminal size of a PTY process.
func (p *Process) Resize(size Size) error {
	if p.tty == nil {
		return ErrNoTTY
	}
	if p.Exited() {
		return errors.New("process has exited")
	}
	if err := pty.Setsize(p.tty, &pty.Winsize{Cols: size.Cols, Rows: size.Rows}); err != nil {
		return fmt.Errorf("setting terminal size: %w", err)
	}
	return nil
}
