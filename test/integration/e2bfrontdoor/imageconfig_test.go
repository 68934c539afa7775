package e2bfrontdoor

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	"github.com/paddock-dev/paddock/api/e2b"
	"github.com/paddock-dev/paddock/internal/image"
	"github.com/paddock-dev/paddock/test/builder"
	"github.com/paddock-dev/paddock/test/framework"
)

// imageRegistry serves a registry on loopback: its private/ repositories answer 401 to
// everyone, and all of it answers 503 while down is set. It returns the reference of an image
// pushed to repo (NAME:TAG).
func imageRegistry(t *testing.T, down *atomic.Bool, repos ...string) map[string]string {
	t.Helper()
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	pushes := httptest.NewServer(reg)
	t.Cleanup(pushes.Close)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case down.Load():
			http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
		case strings.HasPrefix(r.URL.Path, "/v2/private/"):
			w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
			http.Error(w, "credentials, please", http.StatusUnauthorized)
		default:
			reg.ServeHTTP(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	img, err := image.FromLayers(image.Config{Entrypoint: []string{"/serve"}})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, repo := range repos {
		tag, err := name.NewTag(strings.TrimPrefix(pushes.URL, "http://") + "/" + repo)
		if err != nil {
			t.Fatal(err)
		}
		if err := remote.Write(tag, img); err != nil {
			t.Fatal(err)
		}
		out[repo] = strings.TrimPrefix(srv.URL, "http://") + "/" + repo
	}
	return out
}

// A template that brings its own image and names no command: create fails at once with a 503
// carrying ImageConfigUnreadable when the registry refuses the image's config (it will not change
// its mind by waiting), but waits through a registry blip (ImageConfigRetrying) and succeeds
// once the registry answers.
func TestCreateFromATemplateWhoseImageConfigCannotBeRead(t *testing.T) {
	h := start(t, 0)
	ctx := framework.Context(t, framework.DefaultTimeout)
	var down atomic.Bool
	images := imageRegistry(t, &down, "private/web:1", "web:1")
	for pool, img := range map[string]string{"refused": images["private/web:1"], "blip": images["web:1"]} {
		framework.MustCreate(t, ctx, env.Client, builder.MakeTemplate(pool+"-tpl", h.ns).Image(img).InjectSandboxd().Port("envd", e2b.EnvdPort).Obj())
		framework.MustCreate(t, ctx, env.Client, builder.MakeWarmPool(pool, h.ns, pool+"-tpl").Replicas(0).Obj())
	}
	create := func(pool string) response {
		var r response
		framework.Eventually(t, func(context.Context) error {
			if r = h.call(t, http.MethodPost, "/v2/sandboxes", h.apiKey, map[string]any{"templateID": pool}); r.status == http.StatusNotFound {
				return fmt.Errorf("the front door does not know pool %s yet: %s", pool, r.body)
			}
			return nil
		})
		return r
	}

	r := create("refused")
	body := string(r.body)
	if r.status != http.StatusServiceUnavailable || !strings.Contains(body, agentsv1beta1.SandboxReasonImageConfigUnreadable) ||
		!strings.Contains(body, "401") || !strings.Contains(body, "cannot be served") || strings.Contains(body, "deadline exceeded") {
		t.Errorf("create from a template whose registry refuses its image: %d %s; want 503 with ImageConfigUnreadable and the 401, at once", r.status, body)
	}

	down.Store(true)
	done := make(chan response, 1)
	go func() { done <- create("blip") }()
	framework.Eventually(t, func(ctx context.Context) error {
		var list agentsv1beta1.SandboxList
		if err := env.Client.List(ctx, &list, client.InNamespace(h.ns)); err != nil {
			return err
		}
		for _, sb := range list.Items {
			if c := meta.FindStatusCondition(sb.Status.Conditions, agentsv1beta1.SandboxConditionReady); c != nil &&
				c.Reason == agentsv1beta1.SandboxReasonImageConfigRetrying && strings.Contains(c.Message, images["web:1"]) {
				return nil
			}
		}
		return fmt.Errorf("no Sandbox of pool blip reports %s yet", agentsv1beta1.SandboxReasonImageConfigRetrying)
	})
	select {
	case r := <-done:
		t.Fatalf("create ended during a registry blip: %d %s; want it to wait", r.status, r.body)
	default:
	}
	down.Store(false)
	if r := <-done; r.status != http.StatusCreated {
		t.Errorf("create once the registry answers again: %d %s; want 201", r.status, r.body)
	}
}
