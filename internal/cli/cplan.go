package cli

import (
	"errors"
	"fmt"
	"path"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Location is one side of `paddock cp`: a path on this machine, "-" (stdin or stdout), or
// CLAIM:PATH inside a claim's sandbox.
type Location struct {
	// Claim is set for a sandbox path; Path is then relative to the sandbox root (or absolute
	// under it, e.g. /workspace/out).
	Claim, Path string
	// Std is "-": stdin as the source, stdout as the destination.
	Std bool
}

// Remote reports whether the location is inside a sandbox.
func (l Location) Remote() bool { return l.Claim != "" }

func (l Location) String() string {
	switch {
	case l.Std:
		return "-"
	case l.Remote():
		return l.Claim + ":" + l.Path
	}
	return l.Path
}

// ParseLocation reads one cp argument. CLAIM:PATH is a sandbox path when CLAIM is a valid claim
// name; anything else is local, and a local path with a colon can be written ./a:b.
func ParseLocation(arg string) (Location, error) {
	if arg == "" {
		return Location{}, errors.New("empty path: give a local path, - or CLAIM:PATH")
	}
	if arg == "-" {
		return Location{Std: true}, nil
	}
	claim, p, ok := strings.Cut(arg, ":")
	if !ok || strings.ContainsAny(claim, "/\\") || len(validation.IsDNS1123Subdomain(claim)) > 0 {
		return Location{Path: arg}, nil
	}
	if p == "" {
		p = "."
	}
	return Location{Claim: claim, Path: p}, nil
}

// ParseCopyArgs reads cp's SRC and DST: exactly one of them must be in a sandbox.
func ParseCopyArgs(src, dst string) (Location, Location, error) {
	s, err := ParseLocation(src)
	if err != nil {
		return s, Location{}, fmt.Errorf("SRC: %w", err)
	}
	d, err := ParseLocation(dst)
	if err != nil {
		return s, d, fmt.Errorf("DST: %w", err)
	}
	switch {
	case s.Remote() && d.Remote():
		return s, d, fmt.Errorf("%s and %s are both in sandboxes: copy to this machine first, then on", src, dst)
	case !s.Remote() && !d.Remote():
		return s, d, fmt.Errorf("neither %q nor %q is CLAIM:PATH: one side of paddock cp must be in a sandbox (use cp for local copies)", src, dst)
	}
	return s, d, nil
}

// Existing describes what is at a destination before the copy.
type Existing struct {
	Exists, IsDir bool
}

// CopyTarget is where a source named srcBase lands when copied to dst, following cp(1): into an
// existing directory under the source's name, else at dst itself. A trailing slash on dst means
// "a directory", so a file goes under it. join is path.Join or filepath.Join for dst's side.
func CopyTarget(srcBase string, srcIsDir bool, dst string, at Existing, join func(...string) string) (string, error) {
	switch {
	case at.Exists && at.IsDir:
		return join(dst, srcBase), nil
	case at.Exists && srcIsDir:
		return "", fmt.Errorf("%s is a file; a directory cannot replace it: name a new path or an existing directory", dst)
	case !at.Exists && !srcIsDir && strings.HasSuffix(dst, "/"):
		return join(dst, srcBase), nil
	}
	return dst, nil
}

// remoteBase is the last element of a sandbox path, "" for the root.
func remoteBase(p string) string {
	b := path.Base(strings.TrimRight(p, "/"))
	if b == "." || b == "/" {
		return ""
	}
	return b
}
