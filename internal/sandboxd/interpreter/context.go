package interpreter

import (
	"errors"
	"strings"
	"sync"
)

// errRemoved is what a cell queued on a context that was removed meanwhile gets.
var errRemoved = errors.New("the context was removed")

// codeContext is one E2B context: a language, a working directory and the kernel holding its
// state. Its cells run one at a time (turn); contexts run in parallel.
type codeContext struct {
	ID, Language, Cwd string

	turn chan struct{} // holds one token while a cell runs

	mu    sync.Mutex
	k     *kernel // nil until started, and after the kernel died
	count int     // executions so far (number_of_executions)
	gone  bool    // removed, or sandboxd stops: no kernel starts again
}

// kernel returns the context's kernel, starting one when there is none (first use, or after
// the last one died). A new kernel starts with the environment of the sandbox's commands now.
func (c *codeContext) kernel(cfg *Config) (*kernel, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gone {
		return nil, errRemoved
	}
	if c.k != nil {
		select {
		case <-c.k.exited:
			c.k = nil
		default:
			return c.k, nil
		}
	}
	k, err := startKernel(cfg, c.Language, c.Cwd, cfg.Environ())
	if err != nil {
		return nil, err
	}
	c.k = k
	return k, nil
}

// current returns the kernel the context's next cell runs in; the caller holds the turn. A
// kernel that has run no cell yet is not yet code of the client's, so it takes the sandbox's
// environment of now (a warm member's default kernel starts before the claim, whose variables
// arrive later): the difference is applied inside the kernel with the first cell, or, when it
// names variables that Python or Node read only as they start (startOnly) or the kernel is
// bash, the kernel is started again with it. A kernel that has run a cell keeps its
// environment, as every running process of the sandbox does.
func (c *codeContext) current(cfg *Config) (*kernel, error) {
	k, err := c.kernel(cfg)
	if err != nil || k.cells > 0 {
		return k, err
	}
	want := cfg.Environ()
	change := diffEnv(k.env, want)
	switch {
	case change == nil:
		return k, nil
	case k.shell || change.startOnly():
		if err := c.restart(cfg); err != nil {
			return nil, err
		}
		return c.kernel(cfg)
	}
	k.env, k.pending = want, change
	return k, nil
}

// envChange is how one environment ("K=V" entries) becomes another: variables to set and
// variables to remove.
type envChange struct {
	set   map[string]string
	unset []string
}

// diffEnv is the change from environment from to environment to, nil when they are the same.
func diffEnv(from, to []string) *envChange {
	old := envMap(from)
	ch := &envChange{set: map[string]string{}}
	for name, v := range envMap(to) {
		if ov, ok := old[name]; !ok || ov != v {
			ch.set[name] = v
		}
		delete(old, name)
	}
	for name := range old {
		ch.unset = append(ch.unset, name)
	}
	if len(ch.set) == 0 && len(ch.unset) == 0 {
		return nil
	}
	return ch
}

func envMap(env []string) map[string]string {
	m := make(map[string]string, len(env))
	for _, kv := range env {
		name, v, _ := strings.Cut(kv, "=")
		m[name] = v
	}
	return m
}

// startOnly says whether the change names a variable that Python or Node read only as they
// start, so setting it in a running kernel would not take effect: PYTHON* (sys.path, flags,
// encodings), NODE_* (options, module paths), LD_* (the dynamic loader), the locale, and HOME
// (Python's user site directory).
func (ch *envChange) startOnly() bool {
	names := make([]string, 0, len(ch.set)+len(ch.unset))
	for name := range ch.set {
		names = append(names, name)
	}
	names = append(names, ch.unset...)
	for _, name := range names {
		switch {
		case strings.HasPrefix(name, "PYTHON"), strings.HasPrefix(name, "NODE_"), strings.HasPrefix(name, "LD_"),
			strings.HasPrefix(name, "LC_"), name == "LANG", name == "LANGUAGE", name == "HOME":
			return true
		}
	}
	return false
}

// restart replaces the kernel with a new one in the context's working directory: all state
// is gone; a running cell ends with an error.
func (c *codeContext) restart(cfg *Config) error {
	c.mu.Lock()
	old := c.k
	c.k = nil
	c.mu.Unlock()
	if old != nil {
		old.stop(stopRestarted)
	}
	_, err := c.kernel(cfg)
	return err
}

// stop ends the kernel for good (the context was removed, or sandboxd stops).
func (c *codeContext) stop(reason stopReason) {
	c.mu.Lock()
	old := c.k
	c.k, c.gone = nil, true
	c.mu.Unlock()
	if old != nil {
		old.stop(reason)
	}
}

// next counts an execution and returns its number.
func (c *codeContext) next() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.count++
	return c.count
}
