package envd

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/paddock-dev/paddock/api/proto/envd/filesystem/filesystempbconnect"
	"github.com/paddock-dev/paddock/api/proto/envd/process/processpbconnect"
	"github.com/paddock-dev/paddock/internal/sandboxd/pathsafe"
	"github.com/paddock-dev/paddock/internal/sandboxd/process"
)

const testToken = "test-token"

// fixture is an envd server over a fresh root, with Connect clients speaking JSON like the SDK.
type fixture struct {
	url   string
	root  *pathsafe.Root
	procs *process.Manager
	proc  processpbconnect.ProcessClient
	fs    filesystempbconnect.FilesystemClient
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	root, err := pathsafe.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	procs := process.NewManager(0)
	// bash -l reads $HOME's profile: the root's, as in the image, not the test machine's.
	home := map[string]string{"HOME": root.Dir()}
	s := New(Config{
		Root:        root,
		Procs:       procs,
		Environ:     func(extra map[string]string) []string { return process.MergeEnv(os.Environ(), home, extra) },
		AccessToken: testToken,
	})
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(func() {
		srv.Close()
		s.Close()
		procs.Shutdown(context.Background())
	})
	opts := []connect.ClientOption{connect.WithProtoJSON(), connect.WithInterceptors(tokenInterceptor(testToken))}
	return &fixture{
		url:   srv.URL,
		root:  root,
		procs: procs,
		proc:  processpbconnect.NewProcessClient(http.DefaultClient, srv.URL, opts...),
		fs:    filesystempbconnect.NewFilesystemClient(http.DefaultClient, srv.URL, opts...),
	}
}

// tokenInterceptor sets X-Access-Token on every call, as the SDK does.
type tokenInterceptor string

func (ti tokenInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		req.Header().Set(AccessTokenHeader, string(ti))
		return next(ctx, req)
	}
}

func (ti tokenInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return func(ctx context.Context, spec connect.Spec) connect.StreamingClientConn {
		conn := next(ctx, spec)
		conn.RequestHeader().Set(AccessTokenHeader, string(ti))
		return conn
	}
}

func (ti tokenInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}
