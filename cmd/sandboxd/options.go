package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/paddock-dev/paddock/api/sandboxd"
	"github.com/paddock-dev/paddock/internal/sandboxd/server"
)

// Options are sandboxd's command-line options. Every flag can also be set through the
// environment variable named in its help; the flag wins when both are given.
type Options struct {
	ListenHost           string
	GRPCPort             int
	RESTPort             int
	LegacyPort           int
	EnvdPort             int
	EnvdAccessToken      string
	RootDir              string
	Token                string
	TokenFile            string
	AllowUnauthenticated bool
	AcceptPortForward    bool
	// AllowUnauthenticatedNetwork is UNSAFE: the migration profile's.
	AllowUnauthenticatedNetwork bool
	ControlTokenFile            string
	RequireClaim                bool
	MaxProcesses                int
	MetadataEnvPrefix           string
	ShutdownTimeout             time.Duration
	HTTPIdleTimeout             time.Duration
	StreamChunkSize             int
	MaxUploadBytes              int64
	MaxExecuteOutputBytes       int
	LegacyExecTimeout           time.Duration
	Version                     bool

	controlToken string // from env SANDBOXD_CONTROL_TOKEN, or read from ControlTokenFile by Validate
}

// env looks up an environment variable, like os.LookupEnv.
type env func(string) (string, bool)

// AddFlags registers the options on fs with defaults taken from the environment via lookup.
func (o *Options) AddFlags(fs *flag.FlagSet, lookup env) {
	str := func(p *string, name, envName, def, usage string) {
		if v, ok := lookup(envName); ok {
			def = v
		}
		fs.StringVar(p, name, def, fmt.Sprintf("%s (env %s)", usage, envName))
	}
	num := func(p *int, name, envName string, def int, usage string) {
		if v, ok := lookup(envName); ok {
			if n, err := strconv.Atoi(v); err == nil {
				def = n
			}
		}
		fs.IntVar(p, name, def, fmt.Sprintf("%s (env %s)", usage, envName))
	}
	num64 := func(p *int64, name, envName string, def int64, usage string) {
		if v, ok := lookup(envName); ok {
			if n, err := strconv.ParseInt(v, 10, 64); err == nil {
				def = n
			}
		}
		fs.Int64Var(p, name, def, fmt.Sprintf("%s (env %s)", usage, envName))
	}
	boolean := func(p *bool, name, envName, usage string, def bool) {
		if v, ok := lookup(envName); ok {
			def, _ = strconv.ParseBool(v)
		}
		fs.BoolVar(p, name, def, fmt.Sprintf("%s (env %s)", usage, envName))
	}
	dur := func(p *time.Duration, name, envName string, def time.Duration, usage string) {
		if v, ok := lookup(envName); ok {
			if d, err := time.ParseDuration(v); err == nil {
				def = d
			}
		}
		fs.DurationVar(p, name, def, fmt.Sprintf("%s (env %s)", usage, envName))
	}
	str(&o.ListenHost, "listen-host", "SANDBOXD_LISTEN_HOST", "0.0.0.0", "address every listener binds; 127.0.0.1 restricts sandboxd to the pod's loopback")
	num(&o.GRPCPort, "grpc-port", "SANDBOXD_GRPC_PORT", 9090, "port of the gRPC process.v1.ProcessService (1-65535)")
	num(&o.RESTPort, "rest-port", "SANDBOXD_REST_PORT", 8080, "port of the REST filesystem and runtime API /v1/... (1-65535)")
	num(&o.LegacyPort, "legacy-port", "SANDBOXD_LEGACY_PORT", 8888, "port of the legacy Python-runtime API (/execute, /upload, ...); 0 turns it off")
	num(&o.EnvdPort, "envd-port", sandboxd.EnvdPortEnv, sandboxd.EnvdPort, "port of E2B's in-sandbox protocol (envd: Connect process/filesystem services, /files, /health) for the unmodified E2B SDKs; 0 turns it off")
	str(&o.EnvdAccessToken, "envd-access-token", sandboxd.EnvdAccessTokenEnv, "", "extra token E2B clients may send as X-Access-Token to the envd port, besides the sandbox token; signed /files URLs are then made with it")
	str(&o.RootDir, "root-dir", "SANDBOXD_ROOT_DIR", "/workspace", "sandbox root: created if missing; every client path is confined to it and commands start in it")
	str(&o.Token, "token", sandboxd.TokenEnv, "", "sandbox token every API call except health must carry (Authorization: Bearer <token>, gRPC metadata authorization, or X-Access-Token); prefer the environment variable: a flag is readable by every process in /proc/<pid>/cmdline")
	str(&o.TokenFile, "token-file", "SANDBOXD_TOKEN_FILE", "", "file holding the sandbox token, used when --token is empty; the sandbox's commands must not be able to read it (they run as sandboxd's user), so prefer the environment variable")
	boolean(&o.AllowUnauthenticated, "allow-unauthenticated", sandboxd.AllowUnauthenticatedEnv, "serve without a sandbox token: anyone who reaches sandboxd's ports can run commands (development only; without it sandboxd refuses to start with no token)", false)
	boolean(&o.AcceptPortForward, "accept-port-forward", sandboxd.AcceptPortForwardEnv, "serve calls without a credential that come through the API server's port-forward to this Pod (kubectl port-forward, upstream's sandboxd pod tunnel), "+
		"as if they carried the sandbox token: the API server checked create on pods/portforward; never the controller's calls, never on a locked warm member; code in the sandbox does not pass as the port-forward", true)
	boolean(&o.AllowUnauthenticatedNetwork, "allow-unauthenticated-network", sandboxd.AllowUnauthenticatedNetworkEnv, "UNSAFE: serve calls without a credential that come over the pod network, as upstream's sandboxes do; "+
		"only NetworkPolicy then limits who can run commands here (the upstream-unauthenticated-migration profile); calls from inside the Pod still need the token", false)
	if v, ok := lookup(sandboxd.ControlTokenEnv); ok {
		o.controlToken = strings.TrimSpace(v)
	}
	str(&o.ControlTokenFile, "control-token-file", "SANDBOXD_CONTROL_TOKEN_FILE", "", "file holding the controller's control token (which authorizes PUT /v1/claim-settings and calls to a locked sandbox), used when env "+sandboxd.ControlTokenEnv+" is empty; without either, claim settings are disabled")
	boolean(&o.RequireClaim, "require-claim", sandboxd.RequireClaimEnv, "start locked: answer only health and control-token calls until claim settings arrive (set on warm-pool members)", false)
	num(&o.MaxProcesses, "max-processes", "SANDBOXD_MAX_PROCESSES", 256, "most commands running at once (429 / RESOURCE_EXHAUSTED beyond it; their descendants are bounded by the pod's PID limit); 0 means no limit")
	str(&o.MetadataEnvPrefix, "metadata-env-prefix", "SANDBOXD_METADATA_ENV_PREFIX", "SANDBOX_", "prefix of the environment variables GET /v1/metadata shows (names that look secret are withheld)")
	dur(&o.ShutdownTimeout, "shutdown-timeout", "SANDBOXD_SHUTDOWN_TIMEOUT", 10*time.Second, "bound on graceful shutdown after SIGTERM")
	dur(&o.HTTPIdleTimeout, "http-idle-timeout", "SANDBOXD_HTTP_IDLE_TIMEOUT", 60*time.Second, "keep-alive idle timeout of the HTTP servers")
	num(&o.StreamChunkSize, "stream-chunk-size", "SANDBOXD_STREAM_CHUNK_SIZE", 0, "largest stdout/stderr chunk of a Start stream in bytes; 0 means 4096")
	num64(&o.MaxUploadBytes, "max-upload-bytes", "SANDBOXD_MAX_UPLOAD_BYTES", 256<<20, "largest accepted upload in bytes (413 beyond it, the old file is kept); 0 means no limit")
	num(&o.MaxExecuteOutputBytes, "max-execute-output-bytes", "SANDBOXD_MAX_EXECUTE_OUTPUT_BYTES", 8<<20, "largest stdout or stderr that Execute and legacy /execute buffer; beyond it the process is killed and the call fails (stream larger output with Start); 0 means no limit")
	legacy := 300 * time.Second
	if v, ok := lookup("SANDBOX_EXEC_TIMEOUT_SECONDS"); ok {
		if n, err := strconv.Atoi(v); err == nil {
			legacy = time.Duration(n) * time.Second
		}
	}
	fs.DurationVar(&o.LegacyExecTimeout, "legacy-exec-timeout", legacy, "timeout of legacy POST /execute, after which the process group is killed (env SANDBOX_EXEC_TIMEOUT_SECONDS, in seconds)")
	fs.BoolVar(&o.Version, "version", false, "print the version and exit")
}

// Validate checks the options and reads the token files.
func (o *Options) Validate() error {
	var errs []error
	checkPort := func(name string, port, min int) {
		if port < min || port > 65535 {
			errs = append(errs, fmt.Errorf("--%s=%d must be between %d and 65535", name, port, min))
		}
	}
	checkPort("grpc-port", o.GRPCPort, 1)
	checkPort("rest-port", o.RESTPort, 1)
	checkPort("legacy-port", o.LegacyPort, 0)
	checkPort("envd-port", o.EnvdPort, 0)
	if !distinctPorts(o.GRPCPort, o.RESTPort, o.LegacyPort, o.EnvdPort) {
		errs = append(errs, fmt.Errorf("--grpc-port=%d, --rest-port=%d, --legacy-port=%d and --envd-port=%d must all differ (0 turns the legacy and envd ports off)",
			o.GRPCPort, o.RESTPort, o.LegacyPort, o.EnvdPort))
	}
	if o.RootDir == "" {
		errs = append(errs, errors.New("--root-dir is empty; pass the sandbox root, e.g. /workspace (sandboxd never defaults to /)"))
	}
	for name, v := range map[string]int64{"stream-chunk-size": int64(o.StreamChunkSize), "max-upload-bytes": o.MaxUploadBytes, "max-execute-output-bytes": int64(o.MaxExecuteOutputBytes), "max-processes": int64(o.MaxProcesses)} {
		if v < 0 {
			errs = append(errs, fmt.Errorf("--%s=%d must not be negative", name, v))
		}
	}
	if o.LegacyExecTimeout <= 0 {
		errs = append(errs, fmt.Errorf("--legacy-exec-timeout=%v must be positive", o.LegacyExecTimeout))
	}
	if o.Token == "" && o.TokenFile != "" {
		tok, err := readToken("--token-file", o.TokenFile)
		errs = append(errs, err)
		o.Token = tok
	}
	if o.controlToken == "" && o.ControlTokenFile != "" {
		tok, err := readToken("--control-token-file", o.ControlTokenFile)
		errs = append(errs, err)
		o.controlToken = tok
	}
	if o.Token == "" && !o.AllowUnauthenticated {
		errs = append(errs, fmt.Errorf("no sandbox token: set env %s (the controller does, from Secret <sandbox>-credentials) or --token-file; "+
			"or pass --allow-unauthenticated (env %s=true) to serve without authentication, for development only", sandboxd.TokenEnv, sandboxd.AllowUnauthenticatedEnv))
	}
	if o.RequireClaim && o.controlToken == "" {
		errs = append(errs, fmt.Errorf("--require-claim (env %s) needs the control token that unlocks the sandbox: set env %s or --control-token-file", sandboxd.RequireClaimEnv, sandboxd.ControlTokenEnv))
	}
	return errors.Join(errs...)
}

// distinctPorts reports whether the ports in use (non-zero) are all different.
func distinctPorts(ports ...int) bool {
	seen := map[int]bool{}
	for _, p := range ports {
		if p == 0 {
			continue
		}
		if seen[p] {
			return false
		}
		seen[p] = true
	}
	return true
}

func readToken(flagName, file string) (string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("%s: %w", flagName, err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("%s=%s is empty; write the token into it or drop the flag", flagName, file)
	}
	return tok, nil
}

// Config is the daemon configuration the options describe.
func (o *Options) Config(environ []string) server.Config {
	return server.Config{
		RootDir:                     o.RootDir,
		Token:                       o.Token,
		EnvdAccessToken:             o.EnvdAccessToken,
		AllowUnauthenticated:        o.AllowUnauthenticated,
		AcceptPortForward:           o.AcceptPortForward,
		AllowUnauthenticatedNetwork: o.AllowUnauthenticatedNetwork,
		ControlToken:                o.controlToken,
		RequireClaim:                o.RequireClaim,
		MaxProcesses:                o.MaxProcesses,
		MetadataEnvPrefix:           o.MetadataEnvPrefix,
		Environ:                     environ,
		StreamChunkSize:             o.StreamChunkSize,
		MaxUploadBytes:              o.MaxUploadBytes,
		MaxExecuteOutputBytes:       o.MaxExecuteOutputBytes,
		LegacyExecTimeout:           o.LegacyExecTimeout,
		ShutdownTimeout:             o.ShutdownTimeout,
		HTTPIdleTimeout:             o.HTTPIdleTimeout,
	}
}
