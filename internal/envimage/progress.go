package envimage

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// tailLines is how much of mmdebstrap's output a failed build shows.
const tailLines = 40

// progress passes mmdebstrap's output on line by line, prefixed with the image's name, and says
// every heartbeat that the build is still running: the longest step (dpkg installing hundreds of
// packages in the chroot) prints nothing for minutes.
type progress struct {
	out    io.Writer
	prefix string
	start  time.Time
	done   chan struct{}

	mu      sync.Mutex
	partial []byte
	last    string // the last line, repeated by the heartbeat
	lines   []string
	stopped bool
}

func newProgress(out io.Writer, name string, heartbeat time.Duration) *progress {
	if out == nil {
		out = io.Discard
	}
	if heartbeat <= 0 {
		heartbeat = 30 * time.Second
	}
	p := &progress{out: out, prefix: "    " + name + ": ", start: time.Now(), done: make(chan struct{})}
	go p.beat(heartbeat)
	return p
}

func (p *progress) beat(every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-p.done:
			return
		case <-t.C:
			p.mu.Lock()
			if p.stopped {
				p.mu.Unlock()
				return
			}
			fmt.Fprintf(p.out, "%sstill running after %s (%s)\n", p.prefix, time.Since(p.start).Round(time.Second), p.last)
			p.mu.Unlock()
		}
	}
}

// Write takes mmdebstrap's stderr.
func (p *progress) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.partial = append(p.partial, b...)
	for {
		i := bytes.IndexByte(p.partial, '\n')
		if i < 0 {
			return len(b), nil
		}
		p.add(strings.TrimRight(string(p.partial[:i]), "\r"))
		p.partial = p.partial[i+1:]
	}
}

func (p *progress) line(s string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.add(s)
}

func (p *progress) add(s string) {
	if strings.TrimSpace(s) == "" {
		return
	}
	fmt.Fprintf(p.out, "%s%s\n", p.prefix, s)
	p.last = strings.TrimPrefix(s, "I: ")
	p.lines = append(p.lines, s)
	if len(p.lines) > tailLines {
		p.lines = p.lines[len(p.lines)-tailLines:]
	}
}

// tail is the last lines mmdebstrap printed, for an error message.
func (p *progress) tail() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(append(p.lines, string(p.partial)), "\n")
}

func (p *progress) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.stopped {
		p.stopped = true
		close(p.done)
	}
}
