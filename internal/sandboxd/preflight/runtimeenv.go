package preflight

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/paddock-dev/paddock/api/sandboxd"
)

// SpecEnvironPath is where stock gVisor's runsc shows every process of a sandbox its container's
// OCI spec environment: the variables the container started with, whatever a process removed
// from its own environment since.
const SpecEnvironPath = "/proc/gvisor/spec_environ"

// maxSpecEnviron bounds what RuntimeEnv reads; an environment is far smaller.
const maxSpecEnviron = 1 << 20

// RuntimeEnv reports whether the runtime shows this container's start environment, with a
// variable sandboxd keeps from its commands (SANDBOXD_*, its tokens), in the file at path
// (SpecEnvironPath outside tests). sandboxd reads it as its own uid, the uid its commands run
// as, so what it can read they can. A missing file is no problem, and neither is one sandboxd may
// not read; any other failure is one, since the check then cannot tell.
func RuntimeEnv(path string) (Problem, bool) {
	fix := "run the sandbox on a runsc without that file (Paddock's hack/build-gvisor.sh builds one, which `paddock dev up` installs) or on another runtime; " +
		"or, accepting that the code in the sandbox can read the sandbox's tokens, set env " + sandboxd.AllowTokenInRuntimeEnvEnv + "=true on the container"
	f, err := os.Open(path)
	if err == nil {
		defer f.Close()
		var b []byte
		if b, err = io.ReadAll(io.LimitReader(f, maxSpecEnviron)); err == nil {
			names := secretNames(b)
			if len(names) == 0 {
				return Problem{}, false
			}
			return Problem{
				Cause: fmt.Sprintf("the container runtime shows every process in the sandbox this container's start environment in %s (stock gVisor), %s included, so the commands sandboxd runs could read its tokens",
					path, strings.Join(names, ", ")),
				Fix: fix,
			}, true
		}
	}
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, fs.ErrPermission) {
		return Problem{}, false
	}
	return Problem{
		Cause: fmt.Sprintf("cannot tell whether the container runtime shows sandboxd's tokens to the commands it runs: reading %s: %v", path, unwrapPath(err)),
		Fix:   fix,
	}, true
}

// secretNames lists the names, never the values, of the SANDBOXD_* variables in a NUL-separated
// environment.
func secretNames(environ []byte) []string {
	var names []string
	for _, kv := range bytes.Split(environ, []byte{0}) {
		name, _, _ := strings.Cut(string(kv), "=")
		if strings.HasPrefix(name, sandboxd.SecretEnvPrefix) {
			names = append(names, name)
		}
	}
	return names
}
