// Package tlsreload serves a certificate and key pair from files and swaps in a new pair when
// the files change, without a restart. It watches the parent directories, because Kubernetes
// updates mounted Secrets by swapping a "..data" symlink rather than writing the files.
package tlsreload

import (
	"context"
	"crypto/tls"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/go-logr/logr"
)

// debounce collects the burst of events one update makes into one reload.
const debounce = 250 * time.Millisecond

// Reloader holds the current certificate.
type Reloader struct {
	certFile, keyFile string
	cert              atomic.Pointer[tls.Certificate]
	// OnReload, when set, is told the outcome of every reload attempt after the first load.
	OnReload func(err error)
	log      logr.Logger
}

// New loads the pair once; a failure here is fatal for the caller.
func New(certFile, keyFile string, log logr.Logger) (*Reloader, error) {
	r := &Reloader{certFile: certFile, keyFile: keyFile, log: log}
	if err := r.load(); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *Reloader) load() error {
	c, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err != nil {
		return fmt.Errorf("loading TLS certificate %s and key %s: %w", r.certFile, r.keyFile, err)
	}
	r.cert.Store(&c)
	return nil
}

// GetCertificate is for tls.Config.GetCertificate.
func (r *Reloader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return r.cert.Load(), nil
}

// Start sets up the watch and then, in the background until ctx ends, reloads on file changes.
// A pair that fails to load is logged and the previous one keeps serving. done is closed when
// the background loop has stopped.
func (r *Reloader) Start(ctx context.Context) (done <-chan struct{}, err error) {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("watching TLS files: %w", err)
	}
	dirs := map[string]bool{filepath.Dir(r.certFile): true, filepath.Dir(r.keyFile): true}
	for d := range dirs {
		if err := w.Add(d); err != nil {
			_ = w.Close()
			return nil, fmt.Errorf("watching TLS directory %s: %w", d, err)
		}
	}
	ch := make(chan struct{})
	go func() {
		defer close(ch)
		defer w.Close()
		r.loop(ctx, w)
	}()
	return ch, nil
}

func (r *Reloader) loop(ctx context.Context, w *fsnotify.Watcher) {
	var timer <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-w.Events:
			if !ok {
				return
			}
			if r.relevant(ev.Name) {
				timer = time.After(debounce)
			}
		case err, ok := <-w.Errors:
			if !ok {
				return
			}
			r.log.Error(err, "TLS file watch error")
		case <-timer:
			timer = nil
			err := r.load()
			if err != nil {
				r.log.Error(err, "TLS reload failed; keeping the previous certificate")
			} else {
				r.log.Info("TLS certificate reloaded", "cert", r.certFile)
			}
			if r.OnReload != nil {
				r.OnReload(err)
			}
		}
	}
}

func (r *Reloader) relevant(name string) bool {
	base := filepath.Base(name)
	return name == r.certFile || name == r.keyFile || strings.HasPrefix(base, "..") ||
		base == filepath.Base(r.certFile) || base == filepath.Base(r.keyFile)
}
