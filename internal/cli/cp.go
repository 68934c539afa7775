package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/paddock-dev/paddock/sdk"
)

// maxRemoteDepth bounds the directory walk in a sandbox: sandboxd lists a symlink as what it
// points to, so a link to a parent directory would otherwise recurse forever.
const maxRemoteDepth = 64

func newCopyCommand(g *Globals) *cobra.Command {
	timeout := defaultTimeout
	cmd := &cobra.Command{
		Use:   "cp SRC DST",
		Short: "Copy files and directories between this machine and a claim's sandbox",
		Long: `Copy files and directories between this machine and a claim's sandbox, through sandboxd's
file API. One of SRC and DST is CLAIM:PATH, with PATH relative to the sandbox root (absolute paths
under the root, such as /workspace/out, work too). As with cp(1), a copy into an existing directory
lands under the source's name. "-" is stdin as SRC and stdout as DST, for a single file's bytes.
Directories are copied recursively with their files' permission bits.`,
		Example: `  # Upload a file and a directory into the sandbox root
  paddock cp ./main.py my-agent:main.py
  paddock cp ./src my-agent:/workspace/

  # Download a result, or print it
  paddock cp my-agent:out/report.json ./report.json
  paddock cp my-agent:out/report.json - | jq .

  # Stream stdin into a file in the sandbox
  tar czf - ./data | paddock cp - my-agent:data.tgz`,
		Args:              cobra.ExactArgs(2),
		ValidArgsFunction: completeCopy(g),
		RunE: func(cmd *cobra.Command, args []string) error {
			src, dst, err := ParseCopyArgs(args[0], args[1])
			if err != nil {
				return err
			}
			if g.RESTPort < 1 || g.RESTPort > 65535 {
				return fmt.Errorf("--rest-port %d: must be between 1 and 65535 (default 8080)", g.RESTPort)
			}
			files, err := g.openFiles(cmd.Context(), src, dst, timeout)
			if err != nil {
				return err
			}
			c := &copier{files: files, stdin: cmd.InOrStdin(), stdout: cmd.OutOrStdout(), stderr: cmd.ErrOrStderr(),
				tty: isTerminal(cmd.ErrOrStderr())}
			if src.Remote() {
				return c.download(cmd.Context(), src, dst)
			}
			return c.upload(cmd.Context(), src, dst)
		},
	}
	g.addRouterFlags(cmd, "base URL of the sandbox-router (default: straight to the pod IP)")
	cmd.Flags().IntVar(&g.RESTPort, "rest-port", 8080, "sandboxd's REST file API port on the pod")
	cmd.Flags().DurationVar(&timeout, "timeout", defaultTimeout, "how long to wait for the claim to be Ready (the copy itself is not bounded)")
	return cmd
}

// openFiles waits, bounded by timeout, for the claim on the remote side to be Ready and returns
// its file API.
func (g *Globals) openFiles(ctx context.Context, src, dst Location, timeout time.Duration) (*sdk.Files, error) {
	remote := src
	if dst.Remote() {
		remote = dst
	}
	s, err := g.connect()
	if err != nil {
		return nil, err
	}
	wait, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	sb, err := s.attach(wait, remote.Claim)
	if err != nil {
		return nil, err
	}
	return sb.Files()
}

// copier moves one SRC to one DST.
type copier struct {
	files          *sdk.Files
	stdin          io.Reader
	stdout, stderr io.Writer
	tty            bool
	progress       *progress
}

// entry is one file or directory of a copy, relative to the copy's root ("" for the root).
type entry struct {
	rel   string
	dir   bool
	mode  fs.FileMode
	size  int64
	local string // the local path when uploading
}

// remoteError says plainly what sandboxd's answer means for path.
func remoteError(loc Location, err error) error {
	switch {
	case errors.Is(err, sdk.ErrFileNotFound):
		return fmt.Errorf("%s does not exist in the sandbox (paths are relative to the sandbox root): %w", loc, err)
	case errors.Is(err, sdk.ErrPermissionDenied):
		return fmt.Errorf("sandboxd refused %s: the path leaves the sandbox root or is not accessible: %w", loc, err)
	}
	return fmt.Errorf("%s: %w", loc, err)
}

// statRemote describes what is at p in the sandbox, Exists false when nothing is.
func (c *copier) statRemote(ctx context.Context, loc Location) (Existing, *sdk.FileInfo, error) {
	info, err := c.files.Stat(ctx, loc.Path)
	switch {
	case errors.Is(err, sdk.ErrFileNotFound):
		return Existing{}, nil, nil
	case err != nil:
		return Existing{}, nil, remoteError(loc, err)
	}
	return Existing{Exists: true, IsDir: info.IsDir}, info, nil
}

func (c *copier) upload(ctx context.Context, src, dst Location) error {
	at, _, err := c.statRemote(ctx, dst)
	if err != nil {
		return err
	}
	if src.Std {
		if at.IsDir {
			return fmt.Errorf("%s is a directory: name the file to write stdin to, e.g. %s", dst, Location{Claim: dst.Claim, Path: path.Join(dst.Path, "stdin.txt")})
		}
		c.progress = newProgress(c.stderr, c.tty, "stdin", -1)
		defer c.progress.finish()
		if err := c.files.Upload(ctx, dst.Path, c.progress.reader(c.stdin), 0o644); err != nil {
			return remoteError(dst, err)
		}
		return nil
	}
	info, err := os.Stat(src.Path)
	if err != nil {
		return fmt.Errorf("local source %s: %w", src, err)
	}
	target, err := CopyTarget(filepath.Base(src.Path), info.IsDir(), dst.Path, at, path.Join)
	if err != nil {
		return fmt.Errorf("%s:%w", dst.Claim, err)
	}
	entries, total, err := planLocal(src.Path, info, c.stderr)
	if err != nil {
		return err
	}
	c.progress = newProgress(c.stderr, c.tty, src.String(), total)
	defer c.progress.finish()
	for _, e := range entries {
		to := Location{Claim: dst.Claim, Path: path.Join(target, e.rel)}
		if e.dir {
			if err := c.files.Mkdir(ctx, to.Path, e.mode); err != nil {
				return remoteError(to, err)
			}
			continue
		}
		if err := c.uploadFile(ctx, e, to); err != nil {
			return err
		}
	}
	return nil
}

func (c *copier) uploadFile(ctx context.Context, e entry, to Location) error {
	f, err := os.Open(e.local)
	if err != nil {
		return fmt.Errorf("reading local file: %w", err)
	}
	defer f.Close()
	if err := c.files.Upload(ctx, to.Path, c.progress.file(f), e.mode); err != nil {
		return remoteError(to, err)
	}
	return nil
}

// planLocal lists what uploading root copies: directories before their contents. Symlinks are
// followed to files; a symlinked directory or a special file is skipped with a note on warn.
func planLocal(root string, info fs.FileInfo, warn io.Writer) ([]entry, int64, error) {
	if !info.IsDir() {
		if !info.Mode().IsRegular() {
			return nil, 0, fmt.Errorf("local source %s is neither a regular file nor a directory", root)
		}
		return []entry{{mode: info.Mode().Perm(), size: info.Size(), local: root}}, info.Size(), nil
	}
	var entries []entry
	var total int64
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("reading local directory: %w", err)
		}
		rel, _ := filepath.Rel(root, p)
		if rel == "." {
			rel = ""
		}
		info, err := os.Stat(p) // follows a symlink
		if err != nil {
			fmt.Fprintf(warn, "paddock cp: skipping %s: %v\n", p, err)
			return nil
		}
		switch {
		case d.IsDir():
			entries = append(entries, entry{rel: filepath.ToSlash(rel), dir: true, mode: info.Mode().Perm()})
		case info.Mode().IsRegular():
			entries = append(entries, entry{rel: filepath.ToSlash(rel), mode: info.Mode().Perm(), size: info.Size(), local: p})
			total += info.Size()
		default:
			fmt.Fprintf(warn, "paddock cp: skipping %s: a symlinked directory or special file is not copied\n", p)
		}
		return nil
	})
	return entries, total, err
}

func (c *copier) download(ctx context.Context, src, dst Location) error {
	at, info, err := c.statRemote(ctx, src)
	if err != nil {
		return err
	}
	if !at.Exists {
		return remoteError(src, sdk.ErrFileNotFound)
	}
	if dst.Std {
		if info.IsDir {
			return fmt.Errorf("%s is a directory: copy it to a local directory instead of -", src)
		}
		c.progress = newProgress(c.stderr, c.tty, src.String(), info.Size)
		defer c.progress.finish()
		if _, _, err := c.files.Download(ctx, src.Path, c.progress.writer(c.stdout)); err != nil {
			return remoteError(src, err)
		}
		return nil
	}
	local, err := statLocal(dst.Path)
	if err != nil {
		return err
	}
	target, err := CopyTarget(remoteBase(src.Path), info.IsDir, dst.Path, local, filepath.Join)
	if err != nil {
		return err
	}
	if st, err := os.Stat(filepath.Dir(target)); err != nil || !st.IsDir() {
		return fmt.Errorf("local directory %s does not exist: create it first", filepath.Dir(target))
	}
	entries, total, err := c.planRemote(ctx, src, info)
	if err != nil {
		return err
	}
	c.progress = newProgress(c.stderr, c.tty, src.String(), total)
	defer c.progress.finish()
	return c.fetch(ctx, src, target, entries)
}

// fetch downloads the planned entries under target, then gives the directories their modes,
// deepest first, so a read-only directory does not stop its own files from being written.
func (c *copier) fetch(ctx context.Context, src Location, target string, entries []entry) error {
	var dirs []entry
	for _, e := range entries {
		to := filepath.Join(target, filepath.FromSlash(e.rel))
		if e.dir {
			if err := os.MkdirAll(to, 0o700); err != nil {
				return err
			}
			dirs = append(dirs, entry{rel: to, mode: e.mode})
			continue
		}
		from := Location{Claim: src.Claim, Path: path.Join(src.Path, e.rel)}
		if err := c.fetchFile(ctx, from, to, e.mode); err != nil {
			return err
		}
	}
	slices.Reverse(dirs)
	for _, d := range dirs {
		if err := os.Chmod(d.rel, d.mode); err != nil {
			return err
		}
	}
	return nil
}

// fetchFile downloads one file next to its destination and renames it into place, so a failed
// copy leaves an existing local file as it was.
func (c *copier) fetchFile(ctx context.Context, from Location, to string, mode fs.FileMode) (err error) {
	tmp, err := os.CreateTemp(filepath.Dir(to), ".paddock-cp-*")
	if err != nil {
		return fmt.Errorf("writing %s: %w", to, err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, _, err := c.files.Download(ctx, from.Path, c.progress.writer(tmp)); err != nil {
		return remoteError(from, err)
	}
	if err := tmp.Chmod(mode); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), to)
}

// planRemote lists what downloading src copies: directories before their contents.
func (c *copier) planRemote(ctx context.Context, src Location, info *sdk.FileInfo) ([]entry, int64, error) {
	if !info.IsDir {
		return []entry{{mode: info.Mode, size: info.Size}}, info.Size, nil
	}
	entries := []entry{{dir: true, mode: info.Mode}}
	var total int64
	var walk func(rel string, depth int) error
	walk = func(rel string, depth int) error {
		dir := Location{Claim: src.Claim, Path: path.Join(src.Path, rel)}
		if depth > maxRemoteDepth {
			return fmt.Errorf("%s is more than %d directories deep; is there a symlink loop?", dir, maxRemoteDepth)
		}
		list, err := c.files.List(ctx, dir.Path)
		if err != nil {
			return remoteError(dir, err)
		}
		for _, e := range list {
			child := path.Join(rel, e.Name)
			entries = append(entries, entry{rel: child, dir: e.IsDir, mode: e.Mode, size: e.Size})
			if e.IsDir {
				if err := walk(child, depth+1); err != nil {
					return err
				}
				continue
			}
			total += e.Size
		}
		return nil
	}
	return entries, total, walk("", 1)
}

func statLocal(p string) (Existing, error) {
	info, err := os.Stat(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return Existing{}, nil
	case err != nil:
		return Existing{}, fmt.Errorf("local destination: %w", err)
	}
	return Existing{Exists: true, IsDir: info.IsDir()}, nil
}
