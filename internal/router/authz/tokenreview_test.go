package authz

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"

	"github.com/paddock-dev/paddock/internal/router/headers"
)

// The real TokenReview and SubjectAccessReview paths run against an API server in
// test/integration/router; the fake clientset here only injects failures and counts calls.
func TestTokenReviewCaching(t *testing.T) {
	var reviews, accessChecks atomic.Int32
	var failReviews atomic.Bool
	cs := fake.NewClientset()
	cs.PrependReactor("create", "tokenreviews", func(a k8stesting.Action) (bool, k8sruntime.Object, error) {
		reviews.Add(1)
		if failReviews.Load() {
			return true, nil, errors.New("apiserver unavailable")
		}
		tr := a.(k8stesting.CreateAction).GetObject().(*authenticationv1.TokenReview)
		tr.Status.Authenticated = tr.Spec.Token == "good"
		tr.Status.User = authenticationv1.UserInfo{Username: "alice"}
		return true, tr, nil
	})
	cs.PrependReactor("create", "subjectaccessreviews", func(a k8stesting.Action) (bool, k8sruntime.Object, error) {
		accessChecks.Add(1)
		sar := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview)
		sar.Status.Allowed = sar.Spec.ResourceAttributes.Name == "mine"
		return true, sar, nil
	})
	a := NewTokenReview(cs, TokenReviewOptions{TTL: time.Hour, CacheSize: 10})
	ask := func(token, sandbox string) int {
		r, _ := http.NewRequest(http.MethodGet, "/", nil)
		if token != "" {
			r.Header.Set("Authorization", "Bearer "+token)
		}
		if err := a.Authorize(context.Background(), r, headers.Target{Namespace: "ns", Name: sandbox}); err != nil {
			return StatusFor(err)
		}
		return http.StatusOK
	}
	steps := []struct {
		token, sandbox          string
		want                    int
		wantReviews, wantChecks int32
	}{
		{"", "mine", 401, 0, 0},
		{"good", "mine", 200, 1, 1},
		{"good", "mine", 200, 1, 1},   // both answers cached
		{"good", "theirs", 403, 1, 2}, // identity cached, access checked per sandbox
		{"good", "theirs", 403, 1, 2}, // denial cached too
		{"bad", "mine", 401, 2, 2},
		{"bad", "mine", 401, 2, 2},
	}
	for i, s := range steps {
		got := ask(s.token, s.sandbox)
		if got != s.want || reviews.Load() != s.wantReviews || accessChecks.Load() != s.wantChecks {
			t.Fatalf("step %d (%q → %s): status %d, reviews %d, checks %d; want %d, %d, %d",
				i, s.token, s.sandbox, got, reviews.Load(), accessChecks.Load(), s.want, s.wantReviews, s.wantChecks)
		}
	}
	failReviews.Store(true)
	if got := ask("other", "mine"); got != http.StatusInternalServerError {
		t.Errorf("API failure answered %d, want 500", got)
	}
	if got := ask("good", "mine"); got != http.StatusOK {
		t.Errorf("a cached token stopped working during an API failure: %d", got)
	}
}

// TestTokenReviewAlwaysAuthenticates: without the access check a request still needs a token.
func TestTokenReviewAlwaysAuthenticates(t *testing.T) {
	a := NewTokenReview(fake.NewClientset(), TokenReviewOptions{SkipAccessCheck: true, TTL: time.Hour, CacheSize: 10})
	r, _ := http.NewRequest(http.MethodGet, "/", nil)
	if got := StatusFor(a.Authorize(context.Background(), r, headers.Target{Namespace: "ns", Name: "sb"})); got != http.StatusUnauthorized {
		t.Errorf("no token answered %d, want 401", got)
	}
}

// A request whose context is already cancelled (the client half-closed its connection after
// sending) still gets the API server's answer: 401 for a token it rejects, not 500.
func TestTokenReviewOutlivesTheRequest(t *testing.T) {
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"apiVersion":"authentication.k8s.io/v1","kind":"TokenReview","status":{"authenticated":false,"error":"invalid token"}}`))
	}))
	defer api.Close()
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: api.URL})
	if err != nil {
		t.Fatal(err)
	}
	a := NewTokenReview(cs, TokenReviewOptions{TTL: time.Hour, CacheSize: 10})
	r, _ := http.NewRequest(http.MethodGet, "/", nil)
	r.Header.Set("Authorization", "Bearer made-up")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if got := StatusFor(a.Authorize(ctx, r, headers.Target{Namespace: "ns", Name: "sb"})); got != http.StatusUnauthorized {
		t.Fatalf("a made-up token on a cancelled request = %d, want 401", got)
	}
}
