package capture

import (
	"context"
	"fmt"

	containersv1 "github.com/containerd/containerd/api/services/containers/v1"
	snapshotsv1 "github.com/containerd/containerd/api/services/snapshots/v1"
	tasksv1 "github.com/containerd/containerd/api/services/tasks/v1"
	tasktypes "github.com/containerd/containerd/api/types/task"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
)

// Mount is one mount of a container's root filesystem as containerd reports it.
type Mount struct {
	Type    string
	Source  string
	Options []string
}

// Runtime is what a capture needs of the node's container runtime.
type Runtime interface {
	// Container returns the runtime (for example io.containerd.runc.v2) and snapshotter of id.
	Container(ctx context.Context, id string) (runtime, snapshotter string, err error)
	// Mounts returns the mounts of the snapshot key of snapshotter.
	Mounts(ctx context.Context, snapshotter, key string) ([]Mount, error)
	Pause(ctx context.Context, id string) error
	Resume(ctx context.Context, id string) error
	// Spec returns id's OCI runtime spec (JSON), whose mounts name the volumes' host paths.
	Spec(ctx context.Context, id string) ([]byte, error)
	// Paused reports whether id's task is paused or pausing.
	Paused(ctx context.Context, id string) (bool, error)
}

// criNamespace is the containerd namespace the CRI plugin keeps Kubernetes containers in.
const criNamespace = "k8s.io"

// Containerd talks to containerd's gRPC API on socket, in the CRI's namespace.
type Containerd struct {
	conn *grpc.ClientConn
}

// DialContainerd connects to containerd's socket (no network: a unix socket on the node).
func DialContainerd(socket string) (*Containerd, error) {
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("connecting to containerd at %s: %w", socket, err)
	}
	return &Containerd{conn: conn}, nil
}

// Close closes the connection.
func (c *Containerd) Close() error { return c.conn.Close() }

func withNamespace(ctx context.Context) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "containerd-namespace", criNamespace)
}

// Container implements Runtime.
func (c *Containerd) Container(ctx context.Context, id string) (string, string, error) {
	resp, err := containersv1.NewContainersClient(c.conn).Get(withNamespace(ctx), &containersv1.GetContainerRequest{ID: id})
	if err != nil {
		return "", "", fmt.Errorf("containerd container %s: %w", id, err)
	}
	return resp.GetContainer().GetRuntime().GetName(), resp.GetContainer().GetSnapshotter(), nil
}

// Spec implements Runtime.
func (c *Containerd) Spec(ctx context.Context, id string) ([]byte, error) {
	resp, err := containersv1.NewContainersClient(c.conn).Get(withNamespace(ctx), &containersv1.GetContainerRequest{ID: id})
	if err != nil {
		return nil, fmt.Errorf("containerd container %s: %w", id, err)
	}
	return resp.GetContainer().GetSpec().GetValue(), nil
}

// Mounts implements Runtime.
func (c *Containerd) Mounts(ctx context.Context, snapshotter, key string) ([]Mount, error) {
	resp, err := snapshotsv1.NewSnapshotsClient(c.conn).Mounts(withNamespace(ctx), &snapshotsv1.MountsRequest{Snapshotter: snapshotter, Key: key})
	if err != nil {
		return nil, fmt.Errorf("containerd mounts of %s snapshot %s: %w", snapshotter, key, err)
	}
	var out []Mount
	for _, m := range resp.GetMounts() {
		out = append(out, Mount{Type: m.GetType(), Source: m.GetSource(), Options: m.GetOptions()})
	}
	return out, nil
}

// Pause implements Runtime.
func (c *Containerd) Pause(ctx context.Context, id string) error {
	_, err := tasksv1.NewTasksClient(c.conn).Pause(withNamespace(ctx), &tasksv1.PauseTaskRequest{ContainerID: id})
	return err
}

// Resume implements Runtime.
func (c *Containerd) Resume(ctx context.Context, id string) error {
	_, err := tasksv1.NewTasksClient(c.conn).Resume(withNamespace(ctx), &tasksv1.ResumeTaskRequest{ContainerID: id})
	return err
}

// Paused implements Runtime.
func (c *Containerd) Paused(ctx context.Context, id string) (bool, error) {
	resp, err := tasksv1.NewTasksClient(c.conn).Get(withNamespace(ctx), &tasksv1.GetRequest{ContainerID: id})
	if err != nil {
		return false, err
	}
	st := resp.GetProcess().GetStatus()
	return st == tasktypes.Status_PAUSED || st == tasktypes.Status_PAUSING, nil
}
