package main

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/paddock-dev/paddock/api/sandboxd"
	"github.com/paddock-dev/paddock/internal/sandboxd/preflight"
	"github.com/paddock-dev/paddock/internal/sandboxd/server"
	"github.com/paddock-dev/paddock/internal/sandboxd/shlex"
	"github.com/paddock-dev/paddock/internal/sandboxd/supervise"
)

// Options are sandboxd's command-line options. Every flag can also be set through the
// environment variable named in its help; the flag wins when both are given.
type Options struct {
	ListenHost        string
	GRPCPort          int
	RESTPort          int
	LegacyPort        int
	EnvdPort          int
	EnvdAccessToken   string
	InterpreterPort   int
	InterpreterPython string
	InterpreterNode   string
	// WarmCommand is the command a locked warm member runs once before its claim ("" for none).
	WarmCommand          string
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
	ClaimHold                   time.Duration
	StreamChunkSize             int
	MaxUploadBytes              int64
	MaxExecuteOutputBytes       int
	LegacyExecTimeout           time.Duration
	// AllowTokenInRuntimeEnv is UNSAFE: serve although the runtime shows the tokens to the commands.
	AllowTokenInRuntimeEnv bool
	Version                bool

	// Bring your own image (docs/byo-image.md).
	InstallTo              string
	Preflight              bool
	TerminationMessagePath string
	ServiceRestart         string
	ServiceRestartBackoff  time.Duration
	// Service is the command after the flags ("sandboxd [flags] -- COMMAND [ARG...]"), run as a
	// supervised service; empty when there is none.
	Service []string

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
	num(&o.GRPCPort, "grpc-port", sandboxd.GRPCPortEnv, sandboxd.GRPCPort, "port of the gRPC process.v1.ProcessService (1-65535)")
	num(&o.RESTPort, "rest-port", sandboxd.RESTPortEnv, sandboxd.RESTPort, "port of the REST filesystem and runtime API /v1/... (1-65535)")
	num(&o.LegacyPort, "legacy-port", sandboxd.LegacyPortEnv, sandboxd.LegacyPort, "port of the legacy Python-runtime API (/execute, /upload, ...); 0 turns it off")
	num(&o.EnvdPort, "envd-port", sandboxd.EnvdPortEnv, sandboxd.EnvdPort, "port of E2B's in-sandbox protocol (envd: Connect process/filesystem services, /files, /health) for the unmodified E2B SDKs; 0 turns it off")
	str(&o.EnvdAccessToken, "envd-access-token", sandboxd.EnvdAccessTokenEnv, "", "extra token E2B clients may send as X-Access-Token to the envd port, besides the sandbox token; signed /files URLs are then made with it")
	num(&o.InterpreterPort, "interpreter-port", sandboxd.InterpreterPortEnv, 0, "port of the code interpreter @e2b/code-interpreter calls (E2B's is "+strconv.Itoa(sandboxd.InterpreterPort)+"; POST /execute, /contexts, /health), with envd's credentials; 0 turns it off")
	str(&o.InterpreterPython, "interpreter-python", "SANDBOXD_INTERPRETER_PYTHON", "python3", "Python the code interpreter's python kernels run (looked up in PATH when bare)")
	str(&o.InterpreterNode, "interpreter-node", "SANDBOXD_INTERPRETER_NODE", "node", "Node.js the code interpreter's javascript kernels run (looked up in PATH when bare)")
	str(&o.WarmCommand, "warm-command", "SANDBOXD_WARM_COMMAND", strings.Join(server.DefaultWarmCommand, " "), "command an unclaimed warm member (locked, with the envd port) runs once before its claim, so that the claim's first command does not pay for its shell's first exec (which under gVisor reads the binary and its libraries); split like a shell line; empty runs none")
	str(&o.RootDir, "root-dir", sandboxd.RootDirEnv, sandboxd.DefaultRootDir, "sandbox root: created if missing; every client path is confined to it and commands start in it")
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
	dur(&o.ClaimHold, "claim-hold", "SANDBOXD_CLAIM_HOLD", server.DefaultClaimHold, "how long an unclaimed warm member holds a call with the sandbox token, waiting for its claim settings, before refusing it (the E2B front door's probe is then answered once the claim lands); 0 refuses at once")
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
	str(&o.InstallTo, "install-to", "SANDBOXD_INSTALL_TO", "", "copy this sandboxd binary to the given path (mode 0555) and exit: how the controller's init container delivers sandboxd into an image that lacks it")
	boolean(&o.Preflight, "preflight", "SANDBOXD_PREFLIGHT", "before serving, check that the container can host sandboxd (not root, no CAP_SYS_PTRACE, /bin/sh and, with the E2B port on, /bin/bash run, a writable sandbox root, the service command exists); "+
		"on failure write the causes and fixes to --termination-message-path and exit "+strconv.Itoa(sandboxd.PreflightExitCode)+" (set by the controller when it injects sandboxd)", false)
	boolean(&o.AllowTokenInRuntimeEnv, "allow-token-in-runtime-env", sandboxd.AllowTokenInRuntimeEnvEnv, "UNSAFE: serve although the container runtime shows every process in the sandbox the container's start environment, sandboxd's tokens included "+
		"(stock gVisor's "+preflight.SpecEnvironPath+"), so that the code sandboxd runs can read them; without it sandboxd refuses to start there, writing why to --termination-message-path and exiting "+strconv.Itoa(sandboxd.PreflightExitCode), false)
	str(&o.TerminationMessagePath, "termination-message-path", "SANDBOXD_TERMINATION_MESSAGE_PATH", "/dev/termination-log", "file a failed --preflight, or a runtime that shows the tokens, writes its message to (the container's terminationMessagePath)")
	str(&o.ServiceRestart, "service-restart", "SANDBOXD_SERVICE_RESTART", string(supervise.Always), "when to restart the service COMMAND after it exits: always, on-failure or never (sandboxd keeps serving either way)")
	dur(&o.ServiceRestartBackoff, "service-restart-backoff", "SANDBOXD_SERVICE_RESTART_BACKOFF", time.Second, "first delay before restarting the service; it doubles after each quick exit, up to a minute")
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
	checkPort("interpreter-port", o.InterpreterPort, 0)
	if !distinctPorts(o.GRPCPort, o.RESTPort, o.LegacyPort, o.EnvdPort, o.InterpreterPort) {
		errs = append(errs, fmt.Errorf("--grpc-port=%d, --rest-port=%d, --legacy-port=%d, --envd-port=%d and --interpreter-port=%d must all differ (0 turns the legacy, envd and interpreter ports off)",
			o.GRPCPort, o.RESTPort, o.LegacyPort, o.EnvdPort, o.InterpreterPort))
	}
	if _, err := shlex.Split(o.WarmCommand); err != nil {
		errs = append(errs, fmt.Errorf("--warm-command=%q: %w; quote it like a shell line, or give \"\" for none", o.WarmCommand, err))
	}
	if o.ClaimHold < 0 {
		errs = append(errs, fmt.Errorf("--claim-hold=%v must not be negative; give 0 to refuse at once", o.ClaimHold))
	}
	if o.InterpreterPort != 0 && (o.InterpreterPython == "" || o.InterpreterNode == "") {
		errs = append(errs, errors.New("--interpreter-python and --interpreter-node must not be empty while --interpreter-port is set; name the interpreters (default python3 and node)"))
	}
	if o.RootDir == "" {
		errs = append(errs, errors.New("--root-dir is empty; pass the sandbox root, e.g. /workspace (sandboxd never defaults to /)"))
	}
	for name, v := range map[string]int64{"stream-chunk-size": int64(o.StreamChunkSize), "max-upload-bytes": o.MaxUploadBytes, "max-execute-output-bytes": int64(o.MaxExecuteOutputBytes), "max-processes": int64(o.MaxProcesses)} {
		if v < 0 {
			errs = append(errs, fmt.Errorf("--%s=%d must not be negative", name, v))
		}
	}
	if _, err := supervise.ParsePolicy(o.ServiceRestart); err != nil {
		errs = append(errs, fmt.Errorf("--service-restart: %w", err))
	}
	if o.ServiceRestartBackoff <= 0 {
		errs = append(errs, fmt.Errorf("--service-restart-backoff=%v must be positive", o.ServiceRestartBackoff))
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
	warm, _ := shlex.Split(o.WarmCommand) // Validate refused what does not split
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
		InterpreterPython:           o.InterpreterPython,
		InterpreterNode:             o.InterpreterNode,
		WarmCommand:                 warm,
		ClaimHold:                   cmp.Or(o.ClaimHold, -1), // the flag's 0 is no hold, the Config's is the default
	}
}

// ServiceConfig is the supervised service's configuration: the command after the flags, with
// the environment sandboxd's commands get (no token, no SANDBOXD_* variable) and sandboxd's stdio
// and working directory, as the container would have run it.
func (o *Options) ServiceConfig(environ []string) supervise.Config {
	policy, _ := supervise.ParsePolicy(o.ServiceRestart)
	return supervise.Config{
		Argv: o.Service, Env: environ, Restart: policy, Backoff: o.ServiceRestartBackoff,
		Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr,
	}
}

// PreflightConfig is what --preflight checks: the shells the sandbox APIs run commands with
// (/bin/bash only while E2B's port is served), the sandbox root and the service command.
func (o *Options) PreflightConfig() preflight.Config {
	shells := []preflight.Shell{{Path: "/bin/sh", NeededBy: "the MCP server's commands and most tools run (/bin/sh -c)",
		Fix: "use an image with a POSIX shell at /bin/sh (Debian, Ubuntu, Alpine and busybox images have one; distroless and scratch images do not)"}}
	if o.EnvdPort != 0 {
		shells = append(shells, preflight.Shell{Path: "/bin/bash", NeededBy: "E2B's SDKs run every command with (/bin/bash -l -c)",
			Fix: "use an image with bash, or set env " + sandboxd.EnvdPortEnv + "=0 on the container to serve without E2B's port"})
	}
	c := preflight.Config{Shells: shells, RootDir: o.RootDir}
	if len(o.Service) > 0 {
		c.Command = o.Service[0]
	}
	return c
}
