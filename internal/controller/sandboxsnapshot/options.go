package sandboxsnapshot

import (
	"cmp"
	"fmt"
	"time"

	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Options configure the controller.
type Options struct {
	// Namespace is where capture Pods run: the controller's own namespace.
	Namespace string
	// Repository is where images are pushed, as host[:port]/path; each snapshot gets
	// <Repository>/<namespace>/<name>-<uid>. Empty leaves snapshots Pending.
	Repository string
	// CaptureImage runs `paddock-snapshot capture` on the node. Empty leaves snapshots Pending.
	CaptureImage string
	// ContainerdSocket is the node's containerd socket, as the capture Pod sees it.
	ContainerdSocket string
	// NodePaths are node directories mounted at the same path in the capture Pod: containerd's
	// socket directory, its root (where the snapshotter keeps upper directories) and the runsc
	// state directory.
	NodePaths []string
	// Runsc is the nodes' runsc binary, mounted into capture Pods to export gVisor containers'
	// writes; empty makes captures of gVisor Sandboxes fail with a message naming the flag.
	Runsc string
	// InsecureRegistry pushes over plain HTTP (the dev registry).
	InsecureRegistry bool
	// ImageDeleteTimeout is how long a deleted snapshot retries deleting its image from a
	// registry that cannot be reached or answers 5xx before it gives up and goes.
	ImageDeleteTimeout time.Duration
	// ReadyTimeout is how long a snapshot waits for its Sandbox to be Ready before failing.
	ReadyTimeout time.Duration
	// CaptureTimeout bounds a capture Pod (activeDeadlineSeconds).
	CaptureTimeout time.Duration
	// PollInterval is how often a Pending or Capturing snapshot is looked at again.
	PollInterval time.Duration
	// APIReader reads capture Pods uncached; the client when nil.
	APIReader client.Reader
	// Clock is the time source; the real clock when nil.
	Clock clock.PassiveClock
}

// Defaults of the options.
const (
	DefaultNamespace          = "paddock-system"
	DefaultContainerdSocket   = "/run/containerd/containerd.sock"
	DefaultReadyTimeout       = 5 * time.Minute
	DefaultCaptureTimeout     = 10 * time.Minute
	DefaultPollInterval       = time.Second
	DefaultImageDeleteTimeout = 2 * time.Minute
)

// DefaultNodePaths are a stock containerd's socket directory and root, and runsc's state.
func DefaultNodePaths() []string {
	return []string{"/run/containerd", "/var/lib/containerd"}
}

func (o Options) withDefaults(c client.Client) (Options, error) {
	for name, d := range map[string]time.Duration{"ReadyTimeout": o.ReadyTimeout, "CaptureTimeout": o.CaptureTimeout, "PollInterval": o.PollInterval, "ImageDeleteTimeout": o.ImageDeleteTimeout} {
		if d < 0 {
			return o, fmt.Errorf("sandbox snapshot reconciler option %s is %s; set a positive duration or 0 for the default", name, d)
		}
	}
	o.Namespace = cmp.Or(o.Namespace, DefaultNamespace)
	o.ContainerdSocket = cmp.Or(o.ContainerdSocket, DefaultContainerdSocket)
	if len(o.NodePaths) == 0 {
		o.NodePaths = DefaultNodePaths()
	}
	o.ReadyTimeout = cmp.Or(o.ReadyTimeout, DefaultReadyTimeout)
	o.CaptureTimeout = cmp.Or(o.CaptureTimeout, DefaultCaptureTimeout)
	o.PollInterval = cmp.Or(o.PollInterval, DefaultPollInterval)
	o.ImageDeleteTimeout = cmp.Or(o.ImageDeleteTimeout, DefaultImageDeleteTimeout)
	o.APIReader = cmp.Or[client.Reader](o.APIReader, c)
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	return o, nil
}
