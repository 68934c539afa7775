// Package imagetest reads OCI image layers back, for tests that check what a layer holds.
package imagetest

import (
	"archive/tar"
	"errors"
	"io"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// Entry is one tar entry of a layer with its content (empty for all but regular files).
type Entry struct {
	Header *tar.Header
	Data   []byte
}

// Entries reads every entry of l's uncompressed tar, in order; a layer that cannot be read fails t.
func Entries(t testing.TB, l v1.Layer) []Entry {
	t.Helper()
	rc, err := l.Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var got []Entry
	r := tar.NewReader(rc)
	for {
		h, err := r.Next()
		if errors.Is(err, io.EOF) {
			return got
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(r)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, Entry{Header: h, Data: data})
	}
}
