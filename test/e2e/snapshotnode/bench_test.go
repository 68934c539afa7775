package snapshotnode

import (
	"fmt"
	"testing"
)

// BenchmarkCapture measures a capture of a container that wrote 10 MB and 500 MB of random
// data (incompressible: the worst case for the push): the time the source is paused (reported
// as paused-ms) and the whole capture (ns/op: pause, copy, resume, gzip, push to a registry on
// loopback). Run: go test -run '^$' -bench Capture -benchtime 3x ./test/e2e/snapshotnode/
func BenchmarkCapture(b *testing.B) {
	for _, mb := range []int{10, 500} {
		b.Run(fmt.Sprintf("%dMB", mb), func(b *testing.B) {
			n := startNode(b)
			id := fmt.Sprintf("src%d", mb)
			n.run(id, n.base, fmt.Sprintf("mkdir -p /work && dd if=/dev/urandom of=/work/data bs=1M count=%d 2>/dev/null", mb))
			var paused, size int64
			for i := 0; b.Loop(); i++ {
				_, sz, p, errMsg := n.capture(id, fmt.Sprint(i))
				if errMsg != "" {
					b.Fatal(errMsg)
				}
				paused += p
				size = sz
			}
			b.ReportMetric(float64(paused)/float64(b.N), "paused-ms")
			b.ReportMetric(float64(size), "layer-bytes")
		})
	}
}

// BenchmarkCaptureVolume measures a capture of a container that wrote 10 MB of random data to
// its volume (a bind-mounted host directory, as a PVC) and nothing to its root filesystem: the
// pause covers the root filesystem and the volume; the whole capture adds the volume layer with
// the restore binary (14 MB, stripped) to the push. Run: go test -run '^$' -bench CaptureVolume
// -benchtime 3x ./test/e2e/snapshotnode/
func BenchmarkCaptureVolume(b *testing.B) {
	n := startNode(b)
	bin := buildRestoreBinary(b)
	n.runWithVolume("src", n.base, b.TempDir(), "dd if=/dev/urandom of=/vol/data bs=1M count=10 2>/dev/null")
	var paused, size int64
	for i := 0; b.Loop(); i++ {
		res := n.captureVolume("src", fmt.Sprint(i), bin)
		if res.Error != "" {
			b.Fatal(res.Error)
		}
		paused += res.PausedMilliseconds
		size = res.SizeBytes
	}
	b.ReportMetric(float64(paused)/float64(b.N), "paused-ms")
	b.ReportMetric(float64(size), "layers-bytes")
}
