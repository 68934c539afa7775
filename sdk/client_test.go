package sdk

import (
	"context"
	"errors"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	agentsv1beta1 "github.com/paddock-dev/paddock/api/agents/v1beta1"
	extensionsv1beta1 "github.com/paddock-dev/paddock/api/extensions/v1beta1"
)

func TestBuildClaim(t *testing.T) {
	now := time.Date(2026, 11, 29, 23, 0, 0, 5, time.FixedZone("x", 3600))
	stamp := "2026-11-29T22:00:00.000000005Z"
	lc := &extensionsv1beta1.Lifecycle{ShutdownPolicy: extensionsv1beta1.ShutdownPolicyDelete}
	tests := []struct {
		name string
		in   ClaimOptions
		want *extensionsv1beta1.SandboxClaim
	}{
		{
			name: "minimal",
			in:   ClaimOptions{WarmPool: "pool", Namespace: "ns"},
			want: &extensionsv1beta1.SandboxClaim{
				ObjectMeta: metav1.ObjectMeta{Namespace: "ns", GenerateName: "sandbox-claim-",
					Labels:      map[string]string{agentsv1beta1.CreatedByLabel: "go-client"},
					Annotations: map[string]string{extensionsv1beta1.ClientFirstRequestedAtAnnotation: stamp}},
				Spec: extensionsv1beta1.SandboxClaimSpec{WarmPoolRef: extensionsv1beta1.SandboxWarmPoolRef{Name: "pool"}},
			},
		},
		{
			name: "everything",
			in: ClaimOptions{WarmPool: "pool", Namespace: "ns", Name: "mine",
				Labels:         map[string]string{"team": "a", agentsv1beta1.CreatedByLabel: "someone"},
				Annotations:    map[string]string{extensionsv1beta1.ClientFirstRequestedAtAnnotation: "earlier"},
				Env:            []extensionsv1beta1.EnvVar{{Name: "A", Value: "1"}},
				PodLabels:      map[string]string{"p": "l"},
				PodAnnotations: map[string]string{"p": "a"},
				Lifecycle:      lc},
			want: &extensionsv1beta1.SandboxClaim{
				ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "mine",
					Labels:      map[string]string{"team": "a", agentsv1beta1.CreatedByLabel: "go-client"},
					Annotations: map[string]string{extensionsv1beta1.ClientFirstRequestedAtAnnotation: "earlier"}},
				Spec: extensionsv1beta1.SandboxClaimSpec{
					WarmPoolRef: extensionsv1beta1.SandboxWarmPoolRef{Name: "pool"},
					Env:         []extensionsv1beta1.EnvVar{{Name: "A", Value: "1"}},
					Lifecycle:   lc,
					AdditionalPodMetadata: extensionsv1beta1.AdditionalPodMetadata{
						Labels:      map[string]extensionsv1beta1.LabelValue{"p": "l"},
						Annotations: map[string]string{"p": "a"}},
				},
			},
		},
		{
			name: "generate name kept",
			in:   ClaimOptions{WarmPool: "pool", GenerateName: "agent-"},
			want: &extensionsv1beta1.SandboxClaim{
				ObjectMeta: metav1.ObjectMeta{GenerateName: "agent-",
					Labels:      map[string]string{agentsv1beta1.CreatedByLabel: "go-client"},
					Annotations: map[string]string{extensionsv1beta1.ClientFirstRequestedAtAnnotation: stamp}},
				Spec: extensionsv1beta1.SandboxClaimSpec{WarmPoolRef: extensionsv1beta1.SandboxWarmPoolRef{Name: "pool"}},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			labels := maps.Clone(tt.in.Labels)
			got := buildClaim(tt.in, now)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("buildClaim (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(labels, tt.in.Labels); diff != "" {
				t.Errorf("buildClaim changed the caller's labels (-before +after):\n%s", diff)
			}
		})
	}
}

func TestClaimOptionsValidate(t *testing.T) {
	tests := []struct {
		in       ClaimOptions
		wantText string // the field the error must name; empty for valid
	}{
		{ClaimOptions{WarmPool: "p"}, ""},
		{ClaimOptions{}, "ClaimOptions.WarmPool"},
		{ClaimOptions{WarmPool: "p", Name: "a", GenerateName: "b-"}, "GenerateName"},
	}
	for _, tt := range tests {
		err := tt.in.validate()
		switch {
		case tt.wantText == "" && err != nil:
			t.Errorf("validate(%+v) = %v, want nil", tt.in, err)
		case tt.wantText != "" && (err == nil || !strings.Contains(err.Error(), tt.wantText)):
			t.Errorf("validate(%+v) = %v, want an error naming %s", tt.in, err, tt.wantText)
		}
	}
}

func TestClaimErrorMessage(t *testing.T) {
	err := &ClaimError{Kind: ErrNotReady, Object: "SandboxClaim", Namespace: "ns", Name: "c",
		Reason: "SandboxNotReady", Message: "pod pending", Detail: "gave up waiting", Err: errTest}
	want := `SandboxClaim ns/c: gave up waiting (last Ready reason "SandboxNotReady": pod pending): boom`
	if diff := cmp.Diff(want, err.Error()); diff != "" {
		t.Errorf("Error() (-want +got):\n%s", diff)
	}
}

var errTest = errorString("boom")

type errorString string

func (e errorString) Error() string { return string(e) }

// TestLookupAndResumeSurfaceAPIErrors injects API failures (the fake client is used only for
// that): they come back naming the object and are not mistaken for a missing claim.
func TestLookupAndResumeSurfaceAPIErrors(t *testing.T) {
	scheme := apiScheme(t)
	claim := &extensionsv1beta1.SandboxClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c"}}
	claim.Status.Sandbox.Name = "sb"
	sandbox := &agentsv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "sb"}}
	unavailable := apierrors.NewServiceUnavailable("etcd is down")
	tests := []struct {
		name     string
		funcs    interceptor.Funcs
		call     func(*Client) error
		wantText string
	}{
		{"lookup read fails", interceptor.Funcs{Get: func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
			return unavailable
		}}, func(c *Client) error { _, err := c.Lookup(context.Background(), "ns", "c"); return err }, "reading claim ns/c: etcd is down"},
		{"attach sandbox read fails", interceptor.Funcs{Get: func(ctx context.Context, cl client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*agentsv1beta1.Sandbox); ok {
				return unavailable
			}
			return cl.Get(ctx, key, obj, opts...)
		}}, func(c *Client) error { _, err := c.Attach(context.Background(), "ns", "c"); return err }, "reading sandbox ns/sb: etcd is down"},
		{"resume patch fails", interceptor.Funcs{Patch: func(context.Context, client.WithWatch, client.Object, client.Patch, ...client.PatchOption) error {
			return unavailable
		}}, func(c *Client) error { _, err := c.Resume(context.Background(), "ns", "c"); return err }, "setting operatingMode Running on sandbox ns/sb: etcd is down"},
		{"resume of a deleted sandbox", interceptor.Funcs{Patch: func(context.Context, client.WithWatch, client.Object, client.Patch, ...client.PatchOption) error {
			return apierrors.NewNotFound(agentsv1beta1.GroupVersion.WithResource("sandboxes").GroupResource(), "sb")
		}}, func(c *Client) error { _, err := c.Resume(context.Background(), "ns", "c"); return err }, "Sandbox ns/sb: setting operatingMode Running"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kube := fake.NewClientBuilder().WithScheme(scheme).WithObjects(claim.DeepCopy(), sandbox.DeepCopy()).
				WithInterceptorFuncs(tt.funcs).Build()
			c, err := NewWithClient(kube, Options{})
			if err != nil {
				t.Fatal(err)
			}
			err = tt.call(c)
			if err == nil || !strings.Contains(err.Error(), tt.wantText) {
				t.Errorf("err = %v, want it to contain %q", err, tt.wantText)
			}
			// Only a NotFound means the object is gone; an API failure must not look like one.
			if wantGone := tt.name == "resume of a deleted sandbox"; errors.Is(err, ErrSandboxGone) != wantGone {
				t.Errorf("errors.Is(err, ErrSandboxGone) = %v, want %v (err: %v)", !wantGone, wantGone, err)
			}
		})
	}
}
