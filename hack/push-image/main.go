// Command push-image wraps one static binary into an OCI image with internal/image and pushes
// it, for scripts that need a controller image of another revision (hack/bench-compare.sh). It
// builds the image the way `paddock dev up` builds paddock-controller's.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/paddock-dev/paddock/internal/image"
)

func main() {
	binary := flag.String("binary", "", "static binary to put into the image")
	entrypoint := flag.String("entrypoint", "/paddock-controller", "path of the binary in the image, run as its entrypoint")
	user := flag.String("user", "65532:65532", "user the container runs as")
	ref := flag.String("ref", "", "where to push, HOST:PORT/NAME:TAG (a loopback registry is reached over plain HTTP)")
	flag.Parse()
	if *binary == "" || *ref == "" {
		fmt.Fprintln(os.Stderr, "push-image: give --binary and --ref")
		os.Exit(2)
	}
	img, err := image.FromTree(image.NewTree().AddFile(*entrypoint, *binary, 0o755),
		image.Config{Entrypoint: []string{*entrypoint}, User: *user})
	if err != nil {
		fmt.Fprintf(os.Stderr, "push-image: building the image of %s: %v\n", *binary, err)
		os.Exit(1)
	}
	pushed, err := image.Push(context.Background(), img, *ref)
	if err != nil {
		fmt.Fprintf(os.Stderr, "push-image: %v\n", err)
		os.Exit(1)
	}
	fmt.Println(pushed.Ref)
}
