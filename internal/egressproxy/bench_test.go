package egressproxy

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// BenchmarkSmallHTTPS measures one HTTPS request on a new connection, direct to the host and
// through the proxy (spliced after the SNI check, and terminated for header injection), and
// reports the p50 and p99 of its latency, and the CPU time of the whole process (client,
// proxy, resolver and host) per request: cpu-ms/op through the proxy less direct's is the
// proxy's, and in milliseconds per request it equals the cores it needs at 1,000 requests/s.
func BenchmarkSmallHTTPS(b *testing.B) {
	w := newWorld(b)
	for _, tc := range []struct {
		name, host string
		via        bool
	}{
		{"direct", "pypi.example.test", false},
		{"spliced", "pypi.example.test", true},
		{"injected", "api.example.test", true},
	} {
		b.Run(tc.name, func(b *testing.B) {
			h := w.pypi
			roots := w.publicCA.Pool()
			if tc.host == "api.example.test" {
				h, roots = w.api, w.egressCA.Pool()
			}
			dst := netip.MustParseAddrPort(h.ip + ":" + h.tls)
			client := &http.Client{Transport: &http.Transport{
				DisableKeepAlives: true,
				TLSClientConfig:   &tls.Config{RootCAs: roots},
				DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
					if tc.via {
						return w.main.dialAddr(ctx, dst)
					}
					return (&net.Dialer{}).DialContext(ctx, "tcp", dst.String())
				},
			}}
			url := "https://" + tc.host + ":" + h.tls + "/"
			lat := make([]time.Duration, 0, b.N)
			cpu := processCPU(b)
			b.ResetTimer()
			for range b.N {
				start := time.Now()
				resp, err := client.Get(url)
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
				lat = append(lat, time.Since(start))
			}
			b.StopTimer()
			b.ReportMetric(float64((processCPU(b)-cpu).Microseconds())/1000/float64(b.N), "cpu-ms/op")
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
		})
	}
}

// BenchmarkDownload measures the throughput of a 64 MiB HTTPS download, direct and spliced
// through the proxy.
func BenchmarkDownload(b *testing.B) {
	const size = 64 << 20
	w := newWorld(b)
	chunk := []byte(strings.Repeat("x", 1<<20))
	big := w.addHostWith("files.cdn.example.test", "127.0.1.9", "files.cdn.example.test", func(rw http.ResponseWriter, _ *http.Request) {
		for range size / len(chunk) {
			_, _ = rw.Write(chunk)
		}
	})
	dst := netip.MustParseAddrPort(big.ip + ":" + big.tls)
	w.zone.add("files.cdn.example.test", big.ip)
	for _, via := range []bool{false, true} {
		name := "direct"
		if via {
			name = "spliced"
		}
		b.Run(name, func(b *testing.B) {
			client := &http.Client{Transport: &http.Transport{
				TLSClientConfig: &tls.Config{RootCAs: w.publicCA.Pool()},
				DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
					if via {
						return w.main.dialAddr(ctx, dst)
					}
					return (&net.Dialer{}).DialContext(ctx, "tcp", dst.String())
				},
			}}
			b.SetBytes(size)
			for range b.N {
				resp, err := client.Get("https://files.cdn.example.test:" + big.tls + "/")
				if err != nil {
					b.Fatal(err)
				}
				n, _ := io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
				if n != size {
					b.Fatalf("got %d bytes", n)
				}
			}
		})
	}
}

// processCPU is the user and system CPU time the test process has used so far.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
