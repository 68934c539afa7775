package devcluster

import (
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/paddock-dev/paddock/internal/image"
)

// The reader address serves the registry's images to the password and nothing else to anyone.
func TestRegistryReaderAddress(t *testing.T) {
	handler := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	full := httptest.NewServer(handler)
	t.Cleanup(full.Close)
	reader := httptest.NewServer(readOnly(handler, RegistryReaderUser, "pw"))
	t.Cleanup(reader.Close)
	img, err := image.FromLayers(image.Config{Entrypoint: []string{"/serve"}})
	if err != nil {
		t.Fatal(err)
	}
	pushed, _ := name.NewTag(strings.TrimPrefix(full.URL, "http://") + "/web:1")
	if err := remote.Write(pushed, img); err != nil {
		t.Fatal(err)
	}
	at, _ := name.NewTag(strings.TrimPrefix(reader.URL, "http://") + "/web:1")
	ok := &authn.Basic{Username: RegistryReaderUser, Password: "pw"}

	got, err := remote.Image(at, remote.WithAuth(ok))
	if err != nil {
		t.Fatalf("reading with the password: %v", err)
	}
	if cfg, err := got.ConfigFile(); err != nil || cfg.Config.Entrypoint[0] != "/serve" {
		t.Fatalf("config read with the password: %v, %v", cfg, err)
	}
	for name, auth := range map[string]authn.Authenticator{"anonymous": authn.Anonymous, "a wrong password": &authn.Basic{Username: RegistryReaderUser, Password: "guess"}} {
		if _, err := remote.Image(at, remote.WithAuth(auth)); err == nil || !strings.Contains(err.Error(), "UNAUTHORIZED") {
			t.Errorf("reading %s: %v; want UNAUTHORIZED", name, err)
		}
	}
	// With the password, still no push and no delete.
	other, _ := name.NewTag(strings.TrimPrefix(reader.URL, "http://") + "/paddock/sandbox:dev")
	if err := remote.Write(other, img, remote.WithAuth(ok)); err == nil {
		t.Error("a push to the reader address succeeded")
	}
	if err := remote.Delete(at, remote.WithAuth(ok)); err == nil {
		t.Error("a delete at the reader address succeeded")
	}
	for _, method := range []string{http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		req, _ := http.NewRequest(method, reader.URL+"/v2/web/blobs/uploads/", nil)
		req.SetBasicAuth(RegistryReaderUser, "pw")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("%s with the password: %d, want 405", method, resp.StatusCode)
		}
	}
	if _, err := remote.Image(pushed); err != nil {
		t.Errorf("the image after the attempts: %v", err)
	}
}

func TestReaderPassword(t *testing.T) {
	file := filepath.Join(t.TempDir(), "registry-reader", "password")
	first, err := ReaderPassword(file)
	if err != nil || len(first) < 32 {
		t.Fatalf("first password %q, %v", first, err)
	}
	st, err := os.Stat(file)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("password file: %v, %v; want mode 0600", st, err)
	}
	if again, err := ReaderPassword(file); err != nil || again != first {
		t.Errorf("second read %q, %v; want the same password", again, err)
	}
	if err := os.WriteFile(file, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReaderPassword(file); err == nil || !strings.Contains(err.Error(), "remove it") {
		t.Errorf("an empty password file: %v", err)
	}
}
