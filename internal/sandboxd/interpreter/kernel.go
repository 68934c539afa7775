package interpreter

import (
	"bufio"
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

var (
	//go:embed drivers/python.py
	pythonDriver string
	//go:embed drivers/node.js
	nodeDriver string
	//go:embed drivers/bash.sh
	bashPrelude string
)

// kernelCommand is how a kernel of lang starts: argv, and whether it reads its requests as
// shell commands on stdin (bash) rather than JSON lines on fd 3.
func (c *Config) kernelCommand(lang string) (argv []string, shell bool) {
	switch lang {
	case Python:
		// The driver reads its arguments (sys.argv[1:]) and sets sys.argv to IPython's [''].
		return []string{c.Python, "-u", "-c", pythonDriver, c.MatplotlibCache}, false
	case JavaScript:
		return []string{c.Node, "-e", nodeDriver}, false
	default:
		return []string{c.Bash, "--noprofile", "--norc", "-s"}, true
	}
}

// stopReason says why sandboxd ended a kernel, for the execution it interrupts.
type stopReason int

const (
	stopNone stopReason = iota
	stopRestarted
	stopRemoved
	stopInterruptFailed
	stopShutdown
)

// kernel is one language process: it runs one cell at a time for its context.
type kernel struct {
	lang   string
	shell  bool
	cmd    *exec.Cmd
	req    *os.File // requests: fd 3, or stdin for bash
	marker string

	// env is the environment code in the kernel sees ("K=V"): the one it started with, until
	// pending changes it. cells counts the cells sent. pending is sent with the next cell and
	// applied for good before it (see codeContext.current). The three belong to the holder of
	// the context's turn.
	env     []string
	cells   int
	pending *envChange

	ready     chan struct{} // closed at the driver's ready message
	readyOnce sync.Once
	exited    chan struct{} // closed when the process has exited
	exitErr   error

	mu   sync.Mutex
	sink func(message) // the running cell's; nil between cells
	// reason is why sandboxd ended the kernel (a stopReason): apart from mu, which a cell's
	// stream writes hold, so stopping never waits for a slow client.
	reason atomic.Int32
}

// startKernel starts a kernel process for lang in dir with env. Its stdio, fd 3 and fd 4 are
// pipes to sandboxd; it leads its own process group, which interrupts and kills address, and
// dies with sandboxd.
func startKernel(cfg *Config, lang, dir string, env []string) (*kernel, error) {
	argv, shell := cfg.kernelCommand(lang)
	var mark [16]byte
	if _, err := rand.Read(mark[:]); err != nil {
		return nil, err
	}
	k := &kernel{lang: lang, shell: shell, marker: "\x1e" + hex.EncodeToString(mark[:]) + "\x1f",
		env: env, ready: make(chan struct{}), exited: make(chan struct{})}
	reqR, reqW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	msgR, msgW, err := os.Pipe()
	if err != nil {
		reqR.Close()
		reqW.Close()
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		closeAll(reqR, reqW, msgR, msgW)
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		closeAll(reqR, reqW, msgR, msgW, outR, outW)
		return nil, err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir, cmd.Env = dir, env
	cmd.Stdout, cmd.Stderr = outW, errW
	cmd.ExtraFiles = []*os.File{reqR, msgW}
	if shell {
		cmd.Stdin = reqR
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	startErr := cmd.Start()
	closeAll(reqR, msgW, outW, errW) // the child holds its ends
	if startErr != nil {
		closeAll(reqW, msgR, outR, errR)
		return nil, fmt.Errorf("starting the %s kernel (%s): %w", lang, argv[0], startErr)
	}
	k.cmd, k.req = cmd, reqW
	go k.readMessages(msgR)
	go k.readOutput(outR, lineStdout)
	go k.readOutput(errR, lineStderr)
	go func() {
		k.exitErr = cmd.Wait()
		close(k.exited)
	}()
	if shell {
		if _, err := io.WriteString(reqW, "__PD_MARK="+ansiQuote(k.marker)+"\n"+bashPrelude+"\n"); err != nil {
			k.stop(stopShutdown)
			return nil, fmt.Errorf("starting the %s kernel: %w", lang, err)
		}
	}
	return k, nil
}

func closeAll(fs ...*os.File) {
	for _, f := range fs {
		f.Close()
	}
}

// deliver hands m to the running cell; between cells only ready matters and the rest (output
// of processes left in the background) is dropped.
func (k *kernel) deliver(m message) {
	if m.Type == "ready" {
		k.readyOnce.Do(func() { close(k.ready) })
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.sink != nil {
		k.sink(m)
	}
}

func (k *kernel) readMessages(r *os.File) {
	defer r.Close()
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			var m message
			if json.Unmarshal(line, &m) == nil {
				k.deliver(m)
			}
		}
		if err != nil {
			return
		}
	}
}

func (k *kernel) readOutput(r *os.File, stream string) {
	defer r.Close()
	s := markScanner{marker: []byte(k.marker)}
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Read(buf)
		for _, p := range s.feed(buf[:n]) {
			if p.mark {
				k.deliver(message{Type: "mark", Text: stream})
			} else {
				k.deliver(message{Type: stream, Text: string(p.text)})
			}
		}
		if err != nil {
			return
		}
	}
}

// waitReady waits for the driver's ready message.
func (k *kernel) waitReady(ctx context.Context) error {
	select {
	case <-k.ready:
		return nil
	case <-k.exited:
		return k.exitError()
	case <-ctx.Done():
		return ctx.Err()
	}
}

// exitError describes how the kernel ended.
func (k *kernel) exitError() error {
	<-k.exited
	if k.exitErr == nil {
		return fmt.Errorf("the %s kernel exited", k.lang)
	}
	return fmt.Errorf("the %s kernel ended: %w", k.lang, k.exitErr)
}

// signal sends sig to the kernel's process group: the driver and what the cell started.
func (k *kernel) signal(sig syscall.Signal) {
	_ = syscall.Kill(-k.cmd.Process.Pid, sig)
}

// stop kills the kernel's process group and waits for the process to exit.
func (k *kernel) stop(reason stopReason) {
	k.reason.CompareAndSwap(int32(stopNone), int32(reason))
	k.signal(syscall.SIGKILL)
	k.req.Close()
	<-k.exited
}

func (k *kernel) stopped() stopReason { return stopReason(k.reason.Load()) }

// cellOutcome is how a cell ended.
type cellOutcome int

const (
	cellDone      cellOutcome = iota // the driver reported done
	cellExited                       // the kernel process ended during the cell
	cellAbandoned                    // the caller went away and the cell was interrupted
)

// interruptAckWait is how long a JavaScript kernel may take to acknowledge an interrupt request
// sent on fd 3 before sandboxd concludes that its event loop is held by synchronous code and
// sends SIGINT, which Node's REPL turns into an interruption only while it evaluates
// synchronously (a SIGINT at any other moment may find Node's default action and end the
// kernel, so it is never sent to a kernel that can read the request).
const interruptAckWait = 200 * time.Millisecond

// execute runs one cell and calls emit with its messages (stdout, stderr, result, error) as
// they come, in the goroutines reading the kernel. When ctx ends first (the client went away),
// it interrupts the cell: with SIGINT (Python, bash), or for JavaScript with an interrupt
// request on fd 3, then SIGINT if the driver does not acknowledge it within interruptAckWait;
// then SIGINT again after grace, and it kills the kernel after twice grace. It returns once the
// kernel is ready for the next cell or gone.
func (k *kernel) execute(ctx context.Context, code string, env map[string]string, grace time.Duration, emit func(message)) (cellOutcome, message, error) {
	k.cells++
	cell := k.cells
	finished := make(chan message, 1)
	acked := make(chan struct{}, 1)
	var done *message
	seen := map[string]bool{}
	check := func() {
		if done == nil {
			return
		}
		for _, s := range done.Marks {
			if !seen[s] {
				return
			}
		}
		k.sink = nil
		finished <- *done
	}
	k.mu.Lock()
	k.sink = func(m message) {
		switch m.Type {
		case "done":
			done = &m
			check()
		case "mark":
			seen[m.Text] = true
			check()
		case "interrupt_ack":
			if m.Cell != cell {
				return // the answer to an interrupt of an earlier cell, which ended meanwhile
			}
			select {
			case acked <- struct{}{}:
			default:
			}
		default:
			emit(m)
		}
	}
	k.mu.Unlock()
	defer func() {
		k.mu.Lock()
		k.sink = nil
		k.mu.Unlock()
	}()
	if _, err := io.WriteString(k.req, k.request(code, env)); err != nil {
		select {
		case <-k.exited:
			return cellExited, message{}, k.exitError()
		default:
			return cellExited, message{}, fmt.Errorf("sending the cell to the %s kernel: %w", k.lang, err)
		}
	}
	var interrupted, awaitingAck bool
	var nudge <-chan time.Time
	kills := 0
	for {
		select {
		case <-acked:
			// The driver read the request: an awaiting cell is ending; go on as after a SIGINT.
			if awaitingAck {
				awaitingAck = false
				nudge = time.After(grace)
			}
		case m := <-finished:
			if interrupted {
				return cellAbandoned, m, nil
			}
			return cellDone, m, nil
		case <-k.exited:
			if interrupted && kills > 0 {
				return cellAbandoned, message{}, k.exitError()
			}
			return cellExited, message{}, k.exitError()
		case <-ctx.Done():
			ctx = context.Background()
			interrupted = true
			if k.lang == JavaScript {
				if _, err := fmt.Fprintf(k.req, "{\"interrupt\":%d}\n", cell); err == nil {
					awaitingAck = true
					nudge = time.After(interruptAckWait)
					continue
				}
			}
			k.signal(syscall.SIGINT)
			nudge = time.After(grace)
		case <-nudge:
			if awaitingAck {
				// No answer: synchronous code holds the event loop, where SIGINT interrupts it.
				awaitingAck = false
				k.signal(syscall.SIGINT)
				nudge = time.After(grace)
				continue
			}
			kills++
			if kills == 1 {
				k.signal(syscall.SIGINT)
				nudge = time.After(grace)
				continue
			}
			k.reason.CompareAndSwap(int32(stopNone), int32(stopInterruptFailed))
			k.signal(syscall.SIGKILL)
			nudge = nil
		}
	}
}

// request is the cell as the kernel reads it: a JSON line, or a shell command for bash, where
// the variables prefixing a function call are set for that call only.
func (k *kernel) request(code string, env map[string]string) string {
	if !k.shell {
		req := map[string]any{"code": code, "env": env, "marker": k.marker}
		if p := k.pending; p != nil {
			req["setenv"], req["unsetenv"] = p.set, p.unset
			k.pending = nil
		}
		b, _ := json.Marshal(req)
		return string(b) + "\n"
	}
	names := make([]string, 0, len(env))
	for name := range env {
		names = append(names, name)
	}
	sort.Strings(names)
	var sb strings.Builder
	for _, name := range names {
		sb.WriteString(name + "=" + ansiQuote(env[name]) + " ")
	}
	sb.WriteString("__pd_cell " + ansiQuote(code) + "\n")
	return sb.String()
}

// ansiQuote quotes s as a bash $'...' string: every byte that is not printable ASCII is \xHH,
// so the command stays on one line and the bytes arrive as sent.
func ansiQuote(s string) string {
	var sb strings.Builder
	sb.WriteString("$'")
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\'' || c == '\\':
			sb.WriteByte('\\')
			sb.WriteByte(c)
		case c >= 0x20 && c < 0x7f:
			sb.WriteByte(c)
		default:
			fmt.Fprintf(&sb, "\\x%02x", c)
		}
	}
	sb.WriteString("'")
	return sb.String()
}
