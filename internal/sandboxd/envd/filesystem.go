package envd

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os/user"
	"path"
	"strconv"
	"sync"
	"syscall"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/paddock-dev/paddock/api/proto/envd/filesystem"
	"github.com/paddock-dev/paddock/internal/sandboxd/files"
)

type filesystemService struct {
	s *Server
}

// entry describes rel (resolved, inside the root) from its Lstat info. A symlink is described by
// what it points to, with symlinkTarget set; one that dangles or leads out of the root is
// described as a symlink only.
func (s *Server) entry(rel string, info fs.FileInfo) *pb.EntryInfo {
	shown := s.paths.display(rel)
	e := &pb.EntryInfo{Name: path.Base(shown), Path: shown}
	if info.Mode()&fs.ModeSymlink != 0 {
		e.Type = pb.FileType_FILE_TYPE_SYMLINK
		if target, err := s.cfg.Root.Resolve(rel); err == nil {
			if tinfo, err := s.cfg.Root.FS().Stat(target); err == nil {
				shownTarget := s.paths.display(target)
				e.SymlinkTarget = &shownTarget
				info = tinfo
			}
		}
	}
	switch {
	case info.IsDir():
		e.Type = pb.FileType_FILE_TYPE_DIRECTORY
	case info.Mode().IsRegular():
		e.Type = pb.FileType_FILE_TYPE_FILE
	}
	e.Size = info.Size()
	e.Mode = uint32(info.Mode().Perm())
	e.Permissions = info.Mode().String()
	e.ModifiedTime = timestamppb.New(info.ModTime())
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		e.Owner, e.Group = ids.user(st.Uid), ids.group(st.Gid)
	}
	return e
}

// ids caches uid and gid names; an id without a name is shown as its number.
var ids = &idNames{users: map[uint32]string{}, groups: map[uint32]string{}}

type idNames struct {
	mu            sync.Mutex
	users, groups map[uint32]string
}

func (n *idNames) user(id uint32) string {
	return n.lookup(n.users, id, func(s string) (string, error) {
		u, err := user.LookupId(s)
		if err != nil {
			return "", err
		}
		return u.Username, nil
	})
}

func (n *idNames) group(id uint32) string {
	return n.lookup(n.groups, id, func(s string) (string, error) {
		g, err := user.LookupGroupId(s)
		if err != nil {
			return "", err
		}
		return g.Name, nil
	})
}

func (n *idNames) lookup(cache map[uint32]string, id uint32, find func(string) (string, error)) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	if name, ok := cache[id]; ok {
		return name
	}
	num := strconv.FormatUint(uint64(id), 10)
	name, err := find(num)
	if err != nil {
		name = num
	}
	cache[id] = name
	return name
}

func (fss *filesystemService) Stat(_ context.Context, req *connect.Request[pb.StatRequest]) (*connect.Response[pb.StatResponse], error) {
	s := fss.s
	rel, err := s.paths.resolveNoFollow(req.Msg.GetPath())
	if err != nil {
		return nil, pathError("path", req.Msg.GetPath(), err)
	}
	info, err := s.cfg.Root.FS().Lstat(rel)
	if err != nil {
		return nil, fsError("path", req.Msg.GetPath(), err)
	}
	return connect.NewResponse(&pb.StatResponse{Entry: s.entry(rel, info)}), nil
}

func (fss *filesystemService) MakeDir(_ context.Context, req *connect.Request[pb.MakeDirRequest]) (*connect.Response[pb.MakeDirResponse], error) {
	s := fss.s
	rel, err := s.paths.resolve(req.Msg.GetPath())
	if err != nil {
		return nil, pathError("path", req.Msg.GetPath(), err)
	}
	if _, err := s.cfg.Root.FS().Lstat(rel); err == nil {
		return nil, connect.NewError(connect.CodeAlreadyExists, fmt.Errorf("path %q already exists", req.Msg.GetPath()))
	}
	if err := s.cfg.Root.FS().MkdirAll(rel, 0o755); err != nil {
		return nil, fsError("path", req.Msg.GetPath(), err)
	}
	info, err := s.cfg.Root.FS().Lstat(rel)
	if err != nil {
		return nil, fsError("path", req.Msg.GetPath(), err)
	}
	return connect.NewResponse(&pb.MakeDirResponse{Entry: s.entry(rel, info)}), nil
}

func (fss *filesystemService) Move(_ context.Context, req *connect.Request[pb.MoveRequest]) (*connect.Response[pb.MoveResponse], error) {
	s := fss.s
	src, err := s.paths.resolveNoFollow(req.Msg.GetSource())
	if err != nil {
		return nil, pathError("source", req.Msg.GetSource(), err)
	}
	dst, err := s.paths.resolveNoFollow(req.Msg.GetDestination())
	if err != nil {
		return nil, pathError("destination", req.Msg.GetDestination(), err)
	}
	if src == "." || dst == "." {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("the home directory itself cannot be moved or replaced"))
	}
	if _, err := s.cfg.Root.FS().Lstat(src); err != nil {
		return nil, fsError("source", req.Msg.GetSource(), err)
	}
	if err := s.cfg.Root.FS().MkdirAll(path.Dir(dst), 0o755); err != nil {
		return nil, fsError("destination", req.Msg.GetDestination(), err)
	}
	if err := s.cfg.Root.FS().Rename(src, dst); err != nil {
		return nil, fsError("destination", req.Msg.GetDestination(), err)
	}
	info, err := s.cfg.Root.FS().Lstat(dst)
	if err != nil {
		return nil, fsError("destination", req.Msg.GetDestination(), err)
	}
	return connect.NewResponse(&pb.MoveResponse{Entry: s.entry(dst, info)}), nil
}

func (fss *filesystemService) ListDir(_ context.Context, req *connect.Request[pb.ListDirRequest]) (*connect.Response[pb.ListDirResponse], error) {
	s := fss.s
	rel, err := s.paths.resolve(req.Msg.GetPath())
	if err != nil {
		return nil, pathError("path", req.Msg.GetPath(), err)
	}
	info, err := s.cfg.Root.FS().Stat(rel)
	if err != nil {
		return nil, fsError("path", req.Msg.GetPath(), err)
	}
	if !info.IsDir() {
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("path %q is not a directory", req.Msg.GetPath()))
	}
	depth := max(req.Msg.GetDepth(), 1)
	out := &pb.ListDirResponse{}
	if err := s.list(rel, depth, &out.Entries); err != nil {
		return nil, fsError("path", req.Msg.GetPath(), err)
	}
	return connect.NewResponse(out), nil
}

// list appends the entries of dir and, depth-1 levels down, of its subdirectories. Symlinked
// directories are listed but not descended into, so a link loop cannot recurse.
func (s *Server) list(dir string, depth uint32, out *[]*pb.EntryInfo) error {
	f, err := s.cfg.Root.FS().Open(dir)
	if err != nil {
		return err
	}
	dirents, err := f.ReadDir(-1)
	f.Close()
	if err != nil {
		return err
	}
	for _, d := range dirents {
		rel := path.Join(dir, d.Name())
		info, err := d.Info()
		if err != nil {
			continue // removed while listing
		}
		*out = append(*out, s.entry(rel, info))
		if depth > 1 && d.IsDir() {
			if err := s.list(rel, depth-1, out); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		}
	}
	return nil
}

func (fss *filesystemService) Remove(_ context.Context, req *connect.Request[pb.RemoveRequest]) (*connect.Response[pb.RemoveResponse], error) {
	s := fss.s
	rel, err := s.paths.resolveNoFollow(req.Msg.GetPath())
	if err != nil {
		return nil, pathError("path", req.Msg.GetPath(), err)
	}
	if err := files.Delete(s.cfg.Root, rel, true); err != nil {
		return nil, fsError("path", req.Msg.GetPath(), err)
	}
	return connect.NewResponse(&pb.RemoveResponse{}), nil
}
