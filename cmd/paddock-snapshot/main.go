// Command paddock-snapshot runs in the capture Pods the SandboxSnapshot controller creates
// (docs/design/snapshots.md): `paddock-snapshot capture --container-id=... --target=...` pauses
// the container, writes its root filesystem's changes as one layer, resumes it, pushes the image
// and writes the result (snapshot.Result) to the termination message. `paddock-snapshot resume
// --container-id=...` resumes a container a killed capture left paused (the resume Pod).
// `paddock-snapshot delete --image=...` deletes a deleted snapshot's image from the registry,
// from the node's network where the capture pushed it (the image delete Pod).
// `paddock-snapshot checkpoint` and `paddock-snapshot forget` write and remove a gVisor memory
// image on the node, for the suspend that keeps memory (the Sandbox controller's node Pods).
// `paddock-snapshot restore --volume=NAME=DIR` runs from a snapshot image (its copy under
// /.paddock) in the restore init container and fills each fresh volume from the image. It
// listens on nothing.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/paddock-dev/paddock/internal/snapshot"
	"github.com/paddock-dev/paddock/internal/snapshot/capture"
	"github.com/paddock-dev/paddock/internal/snapshot/layer"
	"github.com/paddock-dev/paddock/internal/snapshot/restore"
)

func main() {
	if len(os.Args) >= 2 && os.Args[1] == "delete" {
		res := deleteImage(os.Args[2:])
		fmt.Println(string(res.Encode()))
		if res.Error != "" {
			os.Exit(1)
		}
		return
	}
	if len(os.Args) >= 2 && os.Args[1] == "restore" {
		if err := restoreVolumes(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "paddock-snapshot restore:", err)
			os.Exit(1)
		}
		return
	}
	if len(os.Args) >= 2 && (os.Args[1] == "checkpoint" || os.Args[1] == "forget") {
		run := map[string]func([]string) error{"checkpoint": checkpointMemory, "forget": forgetMemory}[os.Args[1]]
		if err := run(os.Args[2:]); err != nil {
			fmt.Fprintf(os.Stderr, "paddock-snapshot %s: %v\n", os.Args[1], err)
			os.Exit(1)
		}
		return
	}
	if len(os.Args) >= 2 && os.Args[1] == "resume" {
		if err := resume(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "paddock-snapshot resume:", err)
			os.Exit(1)
		}
		return
	}
	if len(os.Args) < 2 || os.Args[1] != "capture" {
		fmt.Fprintln(os.Stderr, "usage: paddock-snapshot capture --container-id=ID --base-image=REF --target=REPO:TAG [flags]\n       paddock-snapshot resume --container-id=ID [--containerd-socket=PATH]\n       paddock-snapshot restore --volume=NAME=DIR [--volume=...]\n       paddock-snapshot delete --image=REPO@DIGEST [--tag=TAG] [--insecure-registry] [--timeout=DURATION]\n       paddock-snapshot checkpoint --runsc=PATH --container-id=ID --name=IMAGE --namespace=NS --max-bytes=N\n       paddock-snapshot forget --name=IMAGE")
		os.Exit(2)
	}
	o, resultFile, socket, err := parse(os.Args[2:])
	res := snapshot.Result{}
	if err == nil {
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
		res = runCapture(ctx, socket, o)
		stop()
	} else {
		res.Error = err.Error()
	}
	if werr := os.WriteFile(resultFile, res.Encode(), 0o644); werr != nil {
		fmt.Fprintf(os.Stderr, "writing the result to %s: %v\n", resultFile, werr)
	}
	fmt.Println(string(res.Encode()))
	if res.Error != "" {
		os.Exit(1)
	}
}

func runCapture(ctx context.Context, socket string, o capture.Options) snapshot.Result {
	rt, err := capture.DialContainerd(socket)
	if err != nil {
		return snapshot.Result{Error: err.Error()}
	}
	defer rt.Close()
	return capture.Run(ctx, rt, o)
}

// resume resumes one container; a container that is not paused or is gone is fine.
func resume(args []string) error {
	fs := flag.NewFlagSet("resume", flag.ContinueOnError)
	socket := fs.String("containerd-socket", "/run/containerd/containerd.sock", "containerd's socket on the node.")
	id := fs.String("container-id", "", "containerd ID of the container to resume.")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *id == "" {
		return errors.New("--container-id is required")
	}
	rt, err := capture.DialContainerd(*socket)
	if err != nil {
		return err
	}
	defer rt.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := capture.Resume(ctx, rt, *id); err != nil {
		return err
	}
	fmt.Printf("container %s is not paused\n", *id)
	return nil
}

// restoreVolumes fills each named volume, mounted at DIR, from the image's copy of it
// (restore.Volume: only an empty volume is filled).
func restoreVolumes(args []string) error {
	fs := flag.NewFlagSet("restore", flag.ContinueOnError)
	var vols []snapshot.Volume
	fs.Func("volume", "NAME=DIR: restore the captured volume NAME into the volume mounted at DIR (repeatable).", func(s string) error {
		v, err := snapshot.ParseVolume(s)
		vols = append(vols, v)
		return err
	})
	from := fs.String("from", "/"+layer.VolumesDir, "Where the image holds the captured volumes.")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if len(vols) == 0 {
		return errors.New("--volume is required")
	}
	for _, v := range vols {
		out, err := restore.Volume(filepath.Join(*from, filepath.Base(v.Name)), v.MountPath)
		if err != nil {
			return fmt.Errorf("volume %s: %w", v.Name, err)
		}
		fmt.Printf("volume %s at %s: %s\n", v.Name, v.MountPath, out)
	}
	return nil
}

// deleteImage deletes one image from its registry and writes the result to the termination
// message.
func deleteImage(args []string) snapshot.Result {
	fs := flag.NewFlagSet("delete", flag.ContinueOnError)
	image := fs.String("image", "", "Image to delete, by digest.")
	tag := fs.String("tag", "", "Tag of the image's repository to delete first (the snapshot's UID).")
	insecure := fs.Bool("insecure-registry", false, "Talk to the registry over plain HTTP.")
	timeout := fs.Duration("timeout", 2*time.Minute, "How long a registry that cannot be reached or answers 5xx is tried again.")
	resultFile := fs.String("result-file", "/dev/termination-log", "Where the result is written (the Pod's termination message).")
	res := snapshot.Result{}
	switch err := fs.Parse(args); {
	case err != nil:
		res = snapshot.Result{Error: err.Error(), Refused: true}
	case *image == "":
		res = snapshot.Result{Error: "--image is required", Refused: true}
	default:
		ctx, cancel := context.WithTimeout(context.Background(), *timeout)
		res = snapshot.DeleteImageRetrying(ctx, *image, *tag, *insecure, 5*time.Second)
		cancel()
	}
	if err := os.WriteFile(*resultFile, res.Encode(), 0o644); err != nil {
		fmt.Fprintf(os.Stderr, "writing the result to %s: %v\n", *resultFile, err)
	}
	return res
}

func parse(args []string) (capture.Options, string, string, error) {
	fs := flag.NewFlagSet("capture", flag.ContinueOnError)
	o := capture.Options{Layer: layer.Options{Limits: layer.DefaultLimits()}}
	var socket, resultFile, runtimeClass string
	fs.StringVar(&socket, "containerd-socket", "/run/containerd/containerd.sock", "containerd's socket on the node.")
	fs.StringVar(&o.ContainerID, "container-id", "", "containerd ID of the container to capture.")
	fs.StringVar(&o.BaseImage, "base-image", "", "Image the container runs, by digest.")
	fs.StringVar(&o.Target, "target", "", "Repository and tag to push the snapshot to.")
	fs.StringVar(&runtimeClass, "runtime-class", "", "RuntimeClass of the source Pod (informational; containerd reports the runtime).")
	fs.BoolVar(&o.Insecure, "insecure-registry", false, "Pull and push over plain HTTP.")
	fs.StringVar(&o.Runsc, "runsc", "", "The node's runsc binary, for gVisor containers (runsc tar rootfs-upper); empty refuses them.")
	fs.StringVar(&o.RunscRoot, "runsc-root", capture.DefaultRunscRoot, "runsc's state directory for containerd's CRI namespace.")
	fs.StringVar(&o.WorkDir, "work-dir", os.TempDir(), "Where the layer is kept while it is pushed.")
	fs.Func("volume", "NAME=MOUNTPATH: also capture the volume the container mounts at MOUNTPATH, as NAME (repeatable).", func(s string) error {
		v, err := snapshot.ParseVolume(s)
		o.Volumes = append(o.Volumes, v)
		return err
	})
	fs.StringVar(&o.HostRoot, "host-root", capture.DefaultHostRoot, "The node's root directory, where volumes' host paths are resolved.")
	fs.Int64Var(&o.Layer.MaxBytes, "max-bytes", o.Layer.MaxBytes, "Most bytes of file content a snapshot may hold.")
	fs.StringVar(&resultFile, "result-file", "/dev/termination-log", "Where the result is written (the Pod's termination message).")
	if err := fs.Parse(args); err != nil {
		return o, resultFile, socket, err
	}
	var errs []error
	for _, f := range []struct{ flag, value string }{{"container-id", o.ContainerID}, {"base-image", o.BaseImage}, {"target", o.Target}} {
		if f.value == "" {
			errs = append(errs, fmt.Errorf("--%s is required", f.flag))
		}
	}
	if o.Layer.MaxBytes <= 0 {
		errs = append(errs, fmt.Errorf("--max-bytes=%d: must be greater than 0", o.Layer.MaxBytes))
	}
	return o, resultFile, socket, errors.Join(errs...)
}
