package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	snapshotsv1alpha1 "github.com/paddock-dev/paddock/api/snapshots/v1alpha1"
	"github.com/paddock-dev/paddock/internal/snapshot/capture"
	"github.com/paddock-dev/paddock/internal/snapshot/memory"
)

// checkpointMemory runs `paddock-snapshot checkpoint`: runsc checkpoint of a gVisor sandbox into
// a root-only image directory on the node (memory.Checkpoint), for the suspend that keeps memory.
// The result, or the error, goes to the termination message, which the controller shows in the
// Sandbox's MemoryKept condition.
func checkpointMemory(args []string) error {
	fs := flag.NewFlagSet("checkpoint", flag.ContinueOnError)
	var o memory.CheckpointOptions
	fs.StringVar(&o.Runsc, "runsc", "", "The node's runsc binary.")
	fs.StringVar(&o.RunscRoot, "runsc-root", capture.DefaultRunscRoot, "runsc's state directory for containerd's CRI namespace.")
	fs.StringVar(&o.ContainerID, "container-id", "", "containerd ID of a container of the sandbox to checkpoint.")
	fs.StringVar(&o.Dir, "dir", snapshotsv1alpha1.MemoryImageDir, "The node's image directory.")
	fs.StringVar(&o.Name, "name", "", "The image's name.")
	fs.StringVar(&o.Namespace, "namespace", "", "The namespace whose Pods may restore the image.")
	fs.Int64Var(&o.MaxBytes, "max-bytes", 0, "Largest image kept; also the free space the node must have.")
	resultFile := fs.String("result-file", "/dev/termination-log", "Where the result is written (the Pod's termination message).")
	err := fs.Parse(args)
	var res memory.Result
	if err == nil {
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
		res, err = memory.Checkpoint(ctx, o)
		stop()
	}
	msg := res.String()
	if err != nil {
		msg = err.Error()
	}
	if werr := os.WriteFile(*resultFile, []byte(msg), 0o644); werr != nil {
		fmt.Fprintf(os.Stderr, "writing the result to %s: %v\n", *resultFile, werr)
	}
	fmt.Println(msg)
	return err
}

// forgetMemory runs `paddock-snapshot forget`: removes one image from the node.
func forgetMemory(args []string) error {
	fs := flag.NewFlagSet("forget", flag.ContinueOnError)
	dir := fs.String("dir", snapshotsv1alpha1.MemoryImageDir, "The node's image directory.")
	name := fs.String("name", "", "The image's name.")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := memory.Forget(*dir, *name); err != nil {
		return err
	}
	fmt.Printf("image %s removed\n", *name)
	return nil
}
