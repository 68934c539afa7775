package envd

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"sync"
	"time"

	"connectrpc.com/connect"
	"github.com/fsnotify/fsnotify"

	pb "github.com/paddock-dev/paddock/api/proto/envd/filesystem"
)

// maxPolledEvents bounds the events a polling watcher keeps between two GetWatcherEvents calls;
// later events are dropped until the client collects them.
const maxPolledEvents = 10000

// dirWatcher watches one directory (and, when recursive, every directory below it) inside the
// root. Event names are relative to the watched directory, as envd reports them.
type dirWatcher struct {
	s            *Server
	w            *fsnotify.Watcher
	rel          string // the watched directory, resolved inside the root
	abs          string
	recursive    bool
	includeEntry bool
}

func (s *Server) watch(userPath string, recursive, includeEntry bool) (*dirWatcher, error) {
	rel, err := s.paths.resolve(userPath)
	if err != nil {
		return nil, pathError("path", userPath, err)
	}
	info, err := s.cfg.Root.FS().Stat(rel)
	if err != nil {
		return nil, fsError("path", userPath, err)
	}
	if !info.IsDir() {
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("path %q is not a directory; watch its parent instead", userPath))
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, connect.NewError(connect.CodeResourceExhausted, fmt.Errorf("creating a file watcher: %w", err))
	}
	dw := &dirWatcher{s: s, w: w, rel: rel, abs: s.cfg.Root.Abs(rel), recursive: recursive, includeEntry: includeEntry}
	if err := dw.add(dw.abs); err != nil {
		w.Close()
		return nil, connect.NewError(connect.CodeInternal, fmt.Errorf("watching %q: %w", userPath, err))
	}
	return dw, nil
}

// add watches dir, and with recursive every directory below it (symlinks are not followed, so
// the watch stays inside the root).
func (dw *dirWatcher) add(dir string) error {
	if !dw.recursive {
		return dw.w.Add(dir)
	}
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil //nolint:nilerr // a directory removed while walking is not an error
		}
		if d.IsDir() {
			return dw.w.Add(p)
		}
		return nil
	})
}

var eventTypes = []struct {
	op  fsnotify.Op
	typ pb.EventType
}{
	{fsnotify.Create, pb.EventType_EVENT_TYPE_CREATE},
	{fsnotify.Write, pb.EventType_EVENT_TYPE_WRITE},
	{fsnotify.Remove, pb.EventType_EVENT_TYPE_REMOVE},
	{fsnotify.Rename, pb.EventType_EVENT_TYPE_RENAME},
	{fsnotify.Chmod, pb.EventType_EVENT_TYPE_CHMOD},
}

// events turns one fsnotify event into envd events, one per operation it carries.
func (dw *dirWatcher) events(ev fsnotify.Event) []*pb.FilesystemEvent {
	name, err := filepath.Rel(dw.abs, ev.Name)
	if err != nil {
		return nil
	}
	if dw.recursive && ev.Has(fsnotify.Create) {
		_ = dw.add(ev.Name) // best effort: a directory gone at once needs no watch
	}
	var out []*pb.FilesystemEvent
	for _, t := range eventTypes {
		if !ev.Has(t.op) {
			continue
		}
		fe := &pb.FilesystemEvent{Name: name, Type: t.typ}
		if dw.includeEntry && t.typ != pb.EventType_EVENT_TYPE_REMOVE && t.typ != pb.EventType_EVENT_TYPE_RENAME {
			rel := path.Join(dw.rel, filepath.ToSlash(name))
			if info, err := dw.s.cfg.Root.FS().Lstat(rel); err == nil {
				fe.Entry = dw.s.entry(rel, info)
			}
		}
		out = append(out, fe)
	}
	return out
}

// run delivers events until ctx ends or the watcher is closed; tick, when not nil, asks for a
// keepalive. It returns the first error of emit or keep.
func (dw *dirWatcher) run(ctx context.Context, tick <-chan time.Time, emit func(*pb.FilesystemEvent) error, keep func() error) error {
	for {
		select {
		case ev, ok := <-dw.w.Events:
			if !ok {
				return nil
			}
			for _, fe := range dw.events(ev) {
				if err := emit(fe); err != nil {
					return err
				}
			}
		case _, ok := <-dw.w.Errors:
			if !ok {
				return nil
			}
		case <-tick:
			if err := keep(); err != nil {
				return err
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (fss *filesystemService) WatchDir(ctx context.Context, req *connect.Request[pb.WatchDirRequest], stream *connect.ServerStream[pb.WatchDirResponse]) error {
	dw, err := fss.s.watch(req.Msg.GetPath(), req.Msg.GetRecursive(), req.Msg.GetIncludeEntry())
	if err != nil {
		return err
	}
	defer dw.w.Close()
	if err := stream.Send(&pb.WatchDirResponse{Event: &pb.WatchDirResponse_Start{Start: &pb.WatchDirResponse_StartEvent{}}}); err != nil {
		return err
	}
	tick, stop := keepalive(req.Header().Get("Keepalive-Ping-Interval"))
	defer stop()
	err = dw.run(ctx, tick, func(fe *pb.FilesystemEvent) error {
		return stream.Send(&pb.WatchDirResponse{Event: &pb.WatchDirResponse_Filesystem{Filesystem: fe}})
	}, func() error {
		return stream.Send(&pb.WatchDirResponse{Event: &pb.WatchDirResponse_Keepalive{Keepalive: &pb.WatchDirResponse_KeepAlive{}}})
	})
	if ctxErr := ctx.Err(); ctxErr != nil && errors.Is(err, ctxErr) {
		return connect.NewError(connect.CodeOf(ctxErr), ctxErr)
	}
	return err
}

// pollWatcher is a watcher whose events a client collects with GetWatcherEvents.
type pollWatcher struct {
	dw     *dirWatcher
	cancel context.CancelFunc

	mu      sync.Mutex
	pending []*pb.FilesystemEvent
}

type watcherTable struct {
	mu   sync.Mutex
	byID map[string]*pollWatcher
}

func (wt *watcherTable) get(id string) (*pollWatcher, error) {
	wt.mu.Lock()
	defer wt.mu.Unlock()
	pw, ok := wt.byID[id]
	if !ok {
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("watcher %q not found; create one with CreateWatcher", id))
	}
	return pw, nil
}

func (wt *watcherTable) remove(id string) (*pollWatcher, bool) {
	wt.mu.Lock()
	defer wt.mu.Unlock()
	pw, ok := wt.byID[id]
	delete(wt.byID, id)
	return pw, ok
}

func (wt *watcherTable) closeAll() {
	wt.mu.Lock()
	all := wt.byID
	wt.byID = map[string]*pollWatcher{}
	wt.mu.Unlock()
	for _, pw := range all {
		pw.cancel()
	}
}

func (fss *filesystemService) CreateWatcher(_ context.Context, req *connect.Request[pb.CreateWatcherRequest]) (*connect.Response[pb.CreateWatcherResponse], error) {
	dw, err := fss.s.watch(req.Msg.GetPath(), req.Msg.GetRecursive(), req.Msg.GetIncludeEntry())
	if err != nil {
		return nil, err
	}
	var b [12]byte
	_, _ = rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	ctx, cancel := context.WithCancel(context.Background())
	pw := &pollWatcher{dw: dw, cancel: cancel}
	go func() {
		defer dw.w.Close()
		_ = dw.run(ctx, nil, func(fe *pb.FilesystemEvent) error {
			pw.mu.Lock()
			if len(pw.pending) < maxPolledEvents {
				pw.pending = append(pw.pending, fe)
			}
			pw.mu.Unlock()
			return nil
		}, nil)
	}()
	fss.s.watchers.mu.Lock()
	fss.s.watchers.byID[id] = pw
	fss.s.watchers.mu.Unlock()
	return connect.NewResponse(&pb.CreateWatcherResponse{WatcherId: id}), nil
}

func (fss *filesystemService) GetWatcherEvents(_ context.Context, req *connect.Request[pb.GetWatcherEventsRequest]) (*connect.Response[pb.GetWatcherEventsResponse], error) {
	pw, err := fss.s.watchers.get(req.Msg.GetWatcherId())
	if err != nil {
		return nil, err
	}
	pw.mu.Lock()
	events := pw.pending
	pw.pending = nil
	pw.mu.Unlock()
	return connect.NewResponse(&pb.GetWatcherEventsResponse{Events: events}), nil
}

func (fss *filesystemService) RemoveWatcher(_ context.Context, req *connect.Request[pb.RemoveWatcherRequest]) (*connect.Response[pb.RemoveWatcherResponse], error) {
	pw, ok := fss.s.watchers.remove(req.Msg.GetWatcherId())
	if !ok {
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("watcher %q not found", req.Msg.GetWatcherId()))
	}
	pw.cancel()
	return connect.NewResponse(&pb.RemoveWatcherResponse{}), nil
}
