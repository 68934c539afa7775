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
