package sandboxclaim

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestLoadAllowedLabelDomains(t *testing.T) {
	dir := t.TempDir()
	if got, err := LoadAllowedLabelDomains(filepath.Join(dir, "missing")); err != nil || got != nil {
		t.Errorf("missing file = %v, %v; want nil, nil", got, err)
	}
	path := filepath.Join(dir, "domains")
	if err := os.WriteFile(path, []byte("a.io,B.io\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := LoadAllowedLabelDomains(path)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"a.io", "b.io"}, got); diff != "" {
		t.Errorf("domains (-want +got):\n%s", diff)
	}
	if _, err := LoadAllowedLabelDomains(dir); err == nil {
		t.Error("reading a directory did not fail")
	}
}
