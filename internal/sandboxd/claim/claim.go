// Package claim holds the per-claim settings of a sandbox: environment variables and files that
// a SandboxClaim asks for, delivered to sandboxd once when a warm sandbox is adopted, so it can
// serve the claim without a cold start. The design is docs/design/sandboxd-claim-settings.md.
package claim

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/paddock-dev/paddock/internal/sandboxd/files"
	"github.com/paddock-dev/paddock/internal/sandboxd/pathsafe"
)

// ErrOtherClaim is returned when settings for a different claim arrive after a claim was set:
// a sandbox serves one claim in its life.
var ErrOtherClaim = errors.New("sandbox already serves another claim")

// Settings is the request body of PUT /v1/claim-settings.
type Settings struct {
	// ClaimName is the SandboxClaim's name, for logs and GET.
	ClaimName string `json:"claimName"`
	// ClaimUID is the SandboxClaim's uid; settings are bound to it.
	ClaimUID string `json:"claimUID"`
	// Env is the claim's spec.env, already filtered to this container by the sender.
	Env []EnvVar `json:"env,omitempty"`
	// Files are written into the sandbox root before the settings take effect.
	Files []File `json:"files,omitempty"`
}

// EnvVar is one environment variable (the shape of SandboxClaim spec.env).
type EnvVar struct {
	Name          string `json:"name"`
	Value         string `json:"value"`
	ContainerName string `json:"containerName,omitempty"`
}

// File is one file to create.
type File struct {
	// Path is inside the sandbox root, confined like every other path.
	Path string `json:"path"`
	// Content is the file's bytes (base64 in JSON).
	Content []byte `json:"content"`
	// Mode is an octal permission string such as "0644" (the default) or "0600".
	Mode string `json:"mode,omitempty"`
}

var (
	envName  = regexp.MustCompile(`^[^=\x00]+$`)
	fileMode = regexp.MustCompile(`^0[0-7]{3}$`)
)

// Validate names the first field that is wrong.
func (s *Settings) Validate() error {
	if s.ClaimUID == "" {
		return errors.New("claimUID is required: pass the SandboxClaim's metadata.uid")
	}
	for i, e := range s.Env {
		if !envName.MatchString(e.Name) {
			return fmt.Errorf("env[%d].name %q must be non-empty and contain neither '=' nor NUL", i, e.Name)
		}
		if strings.ContainsRune(e.Value, 0) {
			return fmt.Errorf("env[%d].value must not contain NUL", i)
		}
	}
	for i, f := range s.Files {
		if f.Path == "" {
			return fmt.Errorf("files[%d].path is required", i)
		}
		if f.Mode != "" && !fileMode.MatchString(f.Mode) {
			return fmt.Errorf("files[%d].mode %q must match ^0[0-7]{3}$, for example \"0644\"", i, f.Mode)
		}
	}
	return nil
}

// Store keeps the settings in force.
type Store struct {
	mu      sync.RWMutex
	current *Settings
	env     map[string]string
}

// Apply validates s, writes its files and makes its env apply to every process started after it
// returns. Applying the same claim again replaces its settings (a retry after a lost response);
// a different claim gets ErrOtherClaim and changes nothing.
func (st *Store) Apply(root *pathsafe.Root, s Settings) error {
	if err := s.Validate(); err != nil {
		return err
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.current != nil && st.current.ClaimUID != s.ClaimUID {
		return fmt.Errorf("%w (claim %q, uid %s); start a new sandbox for claim %q", ErrOtherClaim,
			st.current.ClaimName, st.current.ClaimUID, s.ClaimName)
	}
	// Confine every path before writing any file, so a bad path leaves nothing half-applied.
	targets := make([]string, len(s.Files))
	for i, f := range s.Files {
		rel, err := root.Resolve(f.Path)
		if err != nil {
			return fmt.Errorf("files[%d].path %q: %w", i, f.Path, err)
		}
		targets[i] = rel
	}
	for i, f := range s.Files {
		if err := writeFile(root, targets[i], f); err != nil {
			return fmt.Errorf("files[%d] %q: %w", i, f.Path, err)
		}
	}
	env := make(map[string]string, len(s.Env))
	for _, e := range s.Env {
		env[e.Name] = e.Value
	}
	st.current, st.env = &s, env
	return nil
}

func writeFile(root *pathsafe.Root, rel string, f File) error {
	mode := int64(0o644)
	if f.Mode != "" {
		mode, _ = strconv.ParseInt(f.Mode, 8, 32) // validated
	}
	return files.Write(root, rel, fs.FileMode(mode), bytes.NewReader(f.Content), 0)
}

// Env returns the claim's environment (nil before any claim); the caller must not modify it.
func (st *Store) Env() map[string]string {
	st.mu.RLock()
	defer st.mu.RUnlock()
	return st.env
}

// Status is what GET /v1/claim-settings shows: which claim, and the names (not the values) of
// what it set, since values may be secrets.
type Status struct {
	ClaimName string   `json:"claimName"`
	ClaimUID  string   `json:"claimUID"`
	Env       []string `json:"env"`
	Files     []string `json:"files"`
}

// Current describes the settings in force; ok is false before any claim.
func (st *Store) Current() (Status, bool) {
	st.mu.RLock()
	defer st.mu.RUnlock()
	if st.current == nil {
		return Status{}, false
	}
	out := Status{ClaimName: st.current.ClaimName, ClaimUID: st.current.ClaimUID,
		Env: slices.Sorted(maps.Keys(st.env)), Files: []string{}}
	for _, f := range st.current.Files {
		out.Files = append(out.Files, f.Path)
	}
	return out, true
}
