package snapshot

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

// DeleteImageRetrying is DeleteImage tried again every interval while the registry cannot be
// reached or answers 5xx, until ctx ends.
func DeleteImageRetrying(ctx context.Context, image, tag string, insecure bool, interval time.Duration) Result {
	for {
		res := DeleteImage(ctx, image, tag, insecure)
		if res.Error == "" || res.Refused {
			return res
		}
		select {
		case <-ctx.Done():
			res.Error += " (gave up: " + ctx.Err().Error() + ")"
			return res
		case <-time.After(interval):
		}
	}
}

// DeleteImage deletes image (a digest reference) from its registry with the OCI distribution
// DELETE, first its tag (best effort, for registries that keep a tag naming a deleted digest),
// then the digest, which decides: a manifest already gone is success. The result says whether
// the registry refused (a 4xx: deletes disabled, no permission), which retrying will not change.
func DeleteImage(ctx context.Context, image, tag string, insecure bool) Result {
	var opts []name.Option
	if insecure {
		opts = append(opts, name.Insecure)
	}
	ref, err := name.NewDigest(image, opts...)
	if err != nil {
		return Result{Error: fmt.Sprintf("image %q is not a digest reference: %v", image, err), Refused: true}
	}
	if tag != "" {
		if t, err := name.NewTag(ref.Context().String()+":"+tag, opts...); err == nil {
			_ = remote.Delete(t, remote.WithContext(ctx))
		}
	}
	err = remote.Delete(ref, remote.WithContext(ctx))
	var terr *transport.Error
	switch {
	case err == nil || errors.As(err, &terr) && terr.StatusCode == http.StatusNotFound:
		return Result{Image: image}
	case errors.As(err, &terr) && terr.StatusCode < http.StatusInternalServerError:
		return Result{Error: fmt.Sprintf("the registry refused to delete %s: %v", image, err), Refused: true}
	}
	return Result{Error: fmt.Sprintf("deleting %s: %v", image, err)}
}
