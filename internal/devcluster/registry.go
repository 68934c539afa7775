package devcluster

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
)

// RegistryReaderUser is the user the registry's reader address admits, with the password in
// the reader password file.
const RegistryReaderUser = "paddock-controller"

// Reader is the registry's second address: read-only and behind a password, on the node's
// address, where the controller's Pod reads what injected images run (docs/byo-image.md).
// The nodes pull from the loopback address; Pods cannot reach that one, and reach this one
// only with the password (sandboxes not at all: their NetworkPolicy denies the node).
type Reader struct {
	// Addr is host:port; empty serves no reader address.
	Addr string
	// PasswordFile holds the password, made (random, mode 0600) when missing.
	PasswordFile string
}

// ServeRegistry serves an OCI registry on addr until ctx ends (`paddock dev registry`), and the
// same registry read-only on reader.Addr. Blobs are kept in dir; manifests live in memory, so
// `up` pushes its images again after a restart.
func ServeRegistry(ctx context.Context, addr, dir string, reader Reader) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	handler := registry.New(registry.WithBlobHandler(registry.NewDiskBlobHandler(dir)), registry.Logger(log.New(os.Stderr, "registry ", log.LstdFlags)))
	servers := []*http.Server{{Addr: addr, Handler: handler, ReadHeaderTimeout: 10 * time.Second}}
	if reader.Addr != "" {
		password, err := ReaderPassword(reader.PasswordFile)
		if err != nil {
			return err
		}
		servers = append(servers, &http.Server{Addr: reader.Addr, Handler: readOnly(handler, RegistryReaderUser, password), ReadHeaderTimeout: 10 * time.Second})
	}
	var listeners []net.Listener
	for _, srv := range servers {
		l, err := net.Listen("tcp", srv.Addr)
		if err != nil {
			for _, l := range listeners {
				_ = l.Close()
			}
			return err
		}
		listeners = append(listeners, l)
	}
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		for _, srv := range servers {
			_ = srv.Shutdown(shutdown)
		}
	}()
	errs := make(chan error, len(servers))
	for i, srv := range servers {
		go func() { errs <- srv.Serve(listeners[i]) }()
	}
	var first error
	for range servers {
		if err := <-errs; !errors.Is(err, http.ErrServerClosed) && first == nil {
			first = err
			for _, srv := range servers {
				_ = srv.Close()
			}
		}
	}
	return first
}

// ReaderPassword reads the reader address's password from file, making a random one first when
// the file does not exist.
func ReaderPassword(file string) (string, error) {
	data, err := os.ReadFile(file)
	if errors.Is(err, os.ErrNotExist) {
		b := make([]byte, 24)
		if _, err := rand.Read(b); err != nil {
			return "", err
		}
		if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
			return "", err
		}
		// O_EXCL: of two processes making it at once, one wins and the other reads its password.
		f, err := os.OpenFile(file, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, os.ErrExist) {
			return ReaderPassword(file)
		}
		if err != nil {
			return "", err
		}
		_, werr := f.WriteString(hex.EncodeToString(b) + "\n")
		if err := errors.Join(werr, f.Close()); err != nil {
			return "", err
		}
		return hex.EncodeToString(b), nil
	}
	if err != nil {
		return "", err
	}
	password := strings.TrimSpace(string(data))
	if password == "" {
		return "", fmt.Errorf("the registry reader's password file %s is empty; remove it to have a new one made", file)
	}
	return password, nil
}

// readOnly serves h's GET and HEAD requests to user with password, and nothing else: no
// anonymous read, no push, no delete.
func readOnly(h http.Handler, user, password string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, p, ok := r.BasicAuth()
		if !ok || subtle.ConstantTimeCompare([]byte(u), []byte(user))&subtle.ConstantTimeCompare([]byte(p), []byte(password)) != 1 {
			w.Header().Set("WWW-Authenticate", `Basic realm="paddock-dev-registry"`)
			http.Error(w, `{"errors":[{"code":"UNAUTHORIZED","message":"credentials required"}]}`, http.StatusUnauthorized)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, `{"errors":[{"code":"UNSUPPORTED","message":"this address is read-only"}]}`, http.StatusMethodNotAllowed)
			return
		}
		h.ServeHTTP(w, r)
	})
}
