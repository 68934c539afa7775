package sdk

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// TestDirectCallsCarryTheSandboxToken: calls straight to a pod carry the token from the
// Sandbox's credentials Secret (read once), Options.Token replaces it, a missing Secret sends
// none, and a Secret the caller may not read is an error that says how to fix it.
func TestDirectCallsCarryTheSandboxToken(t *testing.T) {
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "sb-credentials"},
		Data: map[string][]byte{"token": []byte("tok-from-secret"), "control-token": []byte("never-sent")}}
	forbidden := interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
		if _, ok := obj.(*corev1.Secret); ok {
			return apierrors.NewForbidden(corev1.Resource("secrets"), key.Name, nil)
		}
		return c.Get(ctx, key, obj, opts...)
	}}
	tests := []struct {
		name      string
		objects   []client.Object
		funcs     interceptor.Funcs
		opts      Options
		wantAuth  string
		wantErr   string
		wantReads int
	}{
		{name: "token from the Secret", objects: []client.Object{secret}, wantAuth: "Bearer tok-from-secret", wantReads: 1},
		{name: "Options.Token wins and reads nothing", objects: []client.Object{secret}, opts: Options{Token: "mine"}, wantAuth: "Bearer mine"},
		{name: "no Secret: credentials are off", wantReads: 1},
		{name: "forbidden", funcs: forbidden, wantErr: "grant this user get on secrets in namespace ns", wantReads: 2},
		{name: "through the router no Secret is read", objects: []client.Object{secret}, opts: Options{RouterURL: "http://127.0.0.1:1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reads := 0
			get := tt.funcs.Get
			tt.funcs.Get = func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				if _, ok := obj.(*corev1.Secret); ok {
					reads++
				}
				if get != nil {
					return get(ctx, c, key, obj, opts...)
				}
				return c.Get(ctx, key, obj, opts...)
			}
			kube := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).WithObjects(tt.objects...).WithInterceptorFuncs(tt.funcs).Build()
			c, err := NewWithClient(kube, tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			sb := &Sandbox{c: c, namespace: "ns", claim: "claim", sandbox: "sb", podIPs: []string{"198.18.0.5"}}
			rt, rtErr := sb.Runtime()
			files, filesErr := sb.Files()
			for what, err := range map[string]error{"Runtime": rtErr, "Files": filesErr} {
				if tt.wantErr == "" && err != nil {
					t.Fatalf("%s: %v", what, err)
				}
				if tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
					t.Fatalf("%s error = %v, want one containing %q", what, err, tt.wantErr)
				}
			}
			if reads != tt.wantReads {
				t.Errorf("read the Secret %d times, want %d", reads, tt.wantReads)
			}
			if tt.wantErr != "" {
				return
			}
			for what, got := range map[string]string{"Runtime": rt.headers.Get("Authorization"), "Files": files.rt.headers.Get("Authorization")} {
				if got != tt.wantAuth {
					t.Errorf("%s sends Authorization %q, want %q", what, got, tt.wantAuth)
				}
			}
		})
	}
}
