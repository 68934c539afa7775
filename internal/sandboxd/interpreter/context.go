package interpreter

import (
	"errors"
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
