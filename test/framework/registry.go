package framework

import (
	"errors"
	"net/http"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

// ManifestStatus is a registry's answer to a GET of image's manifest: 200, or the error's HTTP
// status. Any other failure (the registry not reachable) fails the test.
func ManifestStatus(t *testing.T, image string) int {
	t.Helper()
	ref, err := name.ParseReference(image)
	if err != nil {
		t.Fatal(err)
	}
	_, err = remote.Get(ref)
	var terr *transport.Error
	switch {
	case err == nil:
		return http.StatusOK
	case errors.As(err, &terr):
		return terr.StatusCode
	}
	t.Fatalf("reading %s from its registry: %v", image, err)
	return 0
}
