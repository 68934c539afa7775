package main

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func parse(t *testing.T, environ map[string]string, args ...string) (*Options, error) {
	t.Helper()
	fs := flag.NewFlagSet("sandboxd", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var o Options
	o.AddFlags(fs, func(k string) (string, bool) { v, ok := environ[k]; return v, ok })
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	return &o, o.Validate()
}

func TestDefaultsMatchTheReferenceDaemon(t *testing.T) {
	o, err := parse(t, map[string]string{"SANDBOXD_TOKEN": "tok"})
	if err != nil {
		t.Fatal(err)
	}
	got := []any{o.ListenHost, o.GRPCPort, o.RESTPort, o.LegacyPort, o.EnvdPort, o.RootDir, o.MetadataEnvPrefix, o.ShutdownTimeout, o.HTTPIdleTimeout, o.LegacyExecTimeout}
	want := []any{"0.0.0.0", 9090, 8080, 8888, 49983, "/workspace", "SANDBOX_", 10 * time.Second, 60 * time.Second, 300 * time.Second}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("defaults (-want +got):\n%s", diff)
	}
}

// TestSafeDefaults: the limits that keep one caller from exhausting the sandbox are on unless
// turned off, and nothing is served unauthenticated without the opt-in.
func TestSafeDefaults(t *testing.T) {
	o, err := parse(t, map[string]string{"SANDBOXD_TOKEN": "tok"})
	if err != nil {
		t.Fatal(err)
	}
	got := []any{o.MaxUploadBytes, o.MaxExecuteOutputBytes, o.MaxProcesses, o.AllowUnauthenticated, o.RequireClaim, o.AcceptPortForward, o.AllowUnauthenticatedNetwork}
	want := []any{int64(256 << 20), 8 << 20, 256, false, false, true, false}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("defaults (-want +got):\n%s", diff)
	}
	// The migration profile's controller sets the network opt-in by environment; the port-forward
	// can be turned off the same way.
	o, err = parse(t, map[string]string{"SANDBOXD_TOKEN": "tok", "SANDBOXD_ALLOW_UNAUTHENTICATED_NETWORK": "true", "SANDBOXD_ACCEPT_PORT_FORWARD": "false"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg := o.Config(nil); !cfg.AllowUnauthenticatedNetwork || cfg.AcceptPortForward {
		t.Errorf("from the environment: AllowUnauthenticatedNetwork %v, AcceptPortForward %v; want true, false", cfg.AllowUnauthenticatedNetwork, cfg.AcceptPortForward)
	}
}

func TestEnvironmentAndFlags(t *testing.T) {
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("tok\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{
		"SANDBOXD_REST_PORT":           "7000",
		"SANDBOXD_ROOT_DIR":            "/from-env",
		"SANDBOXD_TOKEN_FILE":          tokenFile,
		"SANDBOX_EXEC_TIMEOUT_SECONDS": "7",
		"SANDBOXD_MAX_UPLOAD_BYTES":    "1048576",
		"SANDBOXD_ENVD_PORT":           "0",
		"SANDBOXD_ENVD_ACCESS_TOKEN":   "e2b-tok",
		"SANDBOXD_CONTROL_TOKEN":       "control",
		"SANDBOXD_REQUIRE_CLAIM":       "true",
		"SANDBOXD_MAX_PROCESSES":       "3",
	}
	o, err := parse(t, env, "--root-dir=/from-flag")
	if err != nil {
		t.Fatal(err)
	}
	cfg := o.Config(nil)
	got := []any{o.RESTPort, o.RootDir, cfg.Token, o.LegacyExecTimeout, o.MaxUploadBytes, cfg.ControlToken, cfg.RequireClaim, cfg.MaxProcesses, o.EnvdPort, cfg.EnvdAccessToken}
	want := []any{7000, "/from-flag", "tok", 7 * time.Second, int64(1 << 20), "control", true, 3, 0, "e2b-tok"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("options (-want +got):\n%s", diff)
	}
}

func TestValidate(t *testing.T) {
	empty := filepath.Join(t.TempDir(), "empty")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--grpc-port=0"}, "--grpc-port=0 must be between 1 and 65535"},
		{[]string{"--rest-port=70000"}, "--rest-port=70000 must be between 1 and 65535"},
		{[]string{"--rest-port=9090"}, "must all differ"},
		{[]string{"--legacy-port=8080"}, "must all differ"},
		{[]string{"--envd-port=9090"}, "must all differ"},
		{[]string{"--envd-port=70000"}, "--envd-port=70000 must be between 0 and 65535"},
		{[]string{"--interpreter-port=49983"}, "must all differ"},
		{[]string{"--interpreter-port=-1"}, "--interpreter-port=-1 must be between 0 and 65535"},
		{[]string{"--interpreter-port=49999", "--interpreter-python="}, "--interpreter-python and --interpreter-node must not be empty"},
		{[]string{"--root-dir="}, "--root-dir is empty"},
		{[]string{"--max-upload-bytes=-1"}, "--max-upload-bytes=-1 must not be negative"},
		{[]string{"--legacy-exec-timeout=0s"}, "--legacy-exec-timeout=0s must be positive"},
		{[]string{"--token-file=/no/such/file"}, "--token-file: open /no/such/file"},
		{[]string{"--control-token-file=" + empty}, "is empty; write the token into it"},
		{[]string{"--max-processes=-1"}, "--max-processes=-1 must not be negative"},
		{nil, "no sandbox token: set env SANDBOXD_TOKEN"},
		{nil, "or pass --allow-unauthenticated (env SANDBOXD_ALLOW_UNAUTHENTICATED=true)"},
		{[]string{"--token=t", "--require-claim"}, "--require-claim (env SANDBOXD_REQUIRE_CLAIM) needs the control token"},
		{[]string{"--service-restart=sometimes"}, `--service-restart: restart policy "sometimes" is not one of always, on-failure, never`},
		{[]string{"--service-restart-backoff=0s"}, "--service-restart-backoff=0s must be positive"},
		{[]string{"--claim-hold=-1s"}, "--claim-hold=-1s must not be negative"},
		{[]string{`--warm-command=bash -c "true`}, `--warm-command="bash -c \"true": No closing quotation`},
	}
	for _, tc := range cases {
		if _, err := parse(t, nil, tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want it to contain %q", tc.args, err, tc.want)
		}
	}
	if _, err := parse(t, nil, "--legacy-port=0", "--envd-port=0", "--allow-unauthenticated"); err != nil {
		t.Errorf("--legacy-port=0 --envd-port=0 (both off) refused: %v", err)
	}
	if _, err := parse(t, map[string]string{"SANDBOXD_ALLOW_UNAUTHENTICATED": "true"}); err != nil {
		t.Errorf("the opt-in through the environment refused: %v", err)
	}
}

// The service after the flags and what --preflight checks follow the options: bash only while
// E2B's port is served, and the service's program.
func TestServiceAndPreflightOptions(t *testing.T) {
	o, err := parse(t, map[string]string{"SANDBOXD_TOKEN": "t", "SANDBOXD_SERVICE_RESTART": "on-failure"}, "--preflight", "--root-dir=/w")
	if err != nil {
		t.Fatal(err)
	}
	o.Service = []string{"python3", "-m", "http.server"}
	svc := o.ServiceConfig([]string{"A=1"})
	pf := o.PreflightConfig()
	var shells []string
	for _, sh := range pf.Shells {
		shells = append(shells, sh.Path)
	}
	got := []any{svc.Argv, svc.Env, string(svc.Restart), svc.Backoff, o.TerminationMessagePath, shells, pf.RootDir, pf.Command}
	want := []any{o.Service, []string{"A=1"}, "on-failure", time.Second, "/dev/termination-log", []string{"/bin/sh", "/bin/bash"}, "/w", "python3"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("service and preflight (-want +got):\n%s", diff)
	}
	o.EnvdPort, o.Service = 0, nil
	if pf := o.PreflightConfig(); len(pf.Shells) != 1 || pf.Command != "" {
		t.Errorf("without E2B's port and a service: shells %v, command %q; want /bin/sh alone and none", pf.Shells, pf.Command)
	}
}

func TestRunExitCodes(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want int
	}{
		{[]string{"--version"}, 0},
		{[]string{"--grpc-port=0"}, 2},
		{nil, 2}, // no token and no opt-in
		{[]string{"--no-such-flag"}, 2},
	} {
		if got := run(tc.args); got != tc.want {
			t.Errorf("run(%q) = %d, want %d", tc.args, got, tc.want)
		}
	}
}

func TestChildEnvironDropsSandboxdVariables(t *testing.T) {
	got := childEnviron([]string{"A=1", "SANDBOXD_TOKEN=secret", "SANDBOXD_CONTROL_TOKEN=c", "SANDBOXD_TOKEN_FILE=/f", "SANDBOXD_ENVD_ACCESS_TOKEN=e", "SANDBOX_NAME=n"})
	if diff := cmp.Diff([]string{"A=1", "SANDBOX_NAME=n"}, got); diff != "" {
		t.Errorf("childEnviron (-want +got):\n%s", diff)
	}
}

// The warm-up command is E2B's shell by default, split like a shell line, and off when empty.
func TestWarmCommand(t *testing.T) {
	for _, tt := range []struct {
		env  map[string]string
		args []string
		want []string
	}{
		{env: map[string]string{"SANDBOXD_TOKEN": "tok"}, want: []string{"/bin/bash", "-l", "-c", "true"}},
		{env: map[string]string{"SANDBOXD_TOKEN": "tok", "SANDBOXD_WARM_COMMAND": "/bin/sh -c 'echo warm'"}, want: []string{"/bin/sh", "-c", "echo warm"}},
		{env: map[string]string{"SANDBOXD_TOKEN": "tok"}, args: []string{"--warm-command="}, want: []string{}},
	} {
		o, err := parse(t, tt.env, tt.args...)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tt.want, o.Config(nil).WarmCommand); diff != "" {
			t.Errorf("env %v args %q: warm command (-want +got):\n%s", tt.env, tt.args, diff)
		}
	}
}

// The claim hold is DefaultClaimHold unless set; 0 turns it off (a negative Config.ClaimHold).
func TestClaimHold(t *testing.T) {
	for _, tt := range []struct {
		env  map[string]string
		want time.Duration
	}{
		{env: map[string]string{"SANDBOXD_TOKEN": "tok"}, want: 2 * time.Second},
		{env: map[string]string{"SANDBOXD_TOKEN": "tok", "SANDBOXD_CLAIM_HOLD": "500ms"}, want: 500 * time.Millisecond},
		{env: map[string]string{"SANDBOXD_TOKEN": "tok", "SANDBOXD_CLAIM_HOLD": "0s"}, want: -1},
	} {
		o, err := parse(t, tt.env)
		if err != nil {
			t.Fatal(err)
		}
		if got := o.Config(nil).ClaimHold; got != tt.want {
			t.Errorf("env %v: ClaimHold %v, want %v", tt.env, got, tt.want)
		}
	}
}
