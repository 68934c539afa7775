package cluster

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/api/egress"
	"github.com/paddock-dev/paddock/internal/devcluster"
	"github.com/paddock-dev/paddock/internal/standin"
	"github.com/paddock-dev/paddock/sdk"
	"github.com/paddock-dev/paddock/test/framework"
)

// Sizes of the download the egress component is killed in the middle of: paced by the
// stand-in, it would take a minute whole, so it is still under way whatever the machine's load
// when the test has seen its first bytes.
const (
	failDownloadSize = 64 << 20
	failDownloadRate = 1 << 20 // bytes a second
	failDownloadSeen = 256 << 10
)

// testEgressFailsClosed kills paddock-egress (SIGKILL, as a crash) while a sandbox on gVisor and
// one on runc download from the stand-in through it, and proves from the stand-in's own request
// log that the component's death opens nothing: the download ends short; requests made while it
// is down, to the allowed host and to a denied one, by name and by address, never reach the
// stand-in, nor do those of a policed sandbox that started while it was down (nor does such a
// sandbox reach a pod listening on the egress proxy's port); once it is
// started again the allowed host answers and the denied one is still refused. Every step waits
// on state (bytes on disk, the process gone, the port closed), never on time.
func testEgressFailsClosed(t *testing.T) {
	cfg := devcluster.Defaults(cmp.Or(suite.stateDir, *stateDirFlag))
	if devcluster.EgressPID(cfg) == 0 {
		t.Skipf("no paddock-egress of paddock dev up runs for state dir %s (pass -state-dir)", cfg.StateDir)
	}
	// Whatever happens below, the component runs again for the rows after this one.
	t.Cleanup(func() {
		if devcluster.EgressPID(cfg) == 0 {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			if _, err := devcluster.StartEgress(ctx, cfg); err != nil {
				t.Errorf("starting paddock-egress again after the test: %v", err)
			}
		}
	})
	ns := namespace(t)
	ctx := framework.Context(t, 20*time.Minute)
	c := paddockClient(t)
	stand := standin.NewClient(filepath.Join(cfg.StateDir, "internet"))
	plan, err := stand.Plan(ctx)
	if err != nil {
		t.Fatalf("the internet stand-in: %v", err)
	}
	addr := func(name string) string {
		h, ok := plan.Lookup(name)
		if !ok {
			t.Fatalf("the stand-in serves no %s: %+v", name, plan.Hosts)
		}
		return h.Addr.String()
	}
	exampleIP, otherIP := addr("example.test"), addr("other.test")
	node := nodeInternalIP(t, ctx)

	// A host listening on the egress proxy's port at another address: a pod of this test, which
	// the host reaches. A policed sandbox with no redirect must not (its policy admits that port
	// only at the node's pod gateway, where the redirect lands).
	create(t, ctx, busyboxPod("port-15001", ns, `mkdir -p /www && echo listener-15001 > /www/index.html && httpd -f -p 15001 -h /www`))
	listener := net.JoinHostPort(waitReady(t, ns, "port-15001"), "15001")
	framework.Eventually(t, func(ctx context.Context) error {
		if body, err := httpGet(ctx, "http://"+listener+"/index.html"); err != nil || body != "listener-15001\n" {
			return fmt.Errorf("the host's GET of the port-15001 listener: %q, %v", body, err)
		}
		return nil
	})

	gvisor, runc := policedTemplate(t, ctx, c, ns, egress.Policy{Allow: []string{"example.test"}, Deny: []string{egress.AllTraffic}})
	for _, name := range []string{gvisor, runc} {
		framework.MustCreate(t, ctx, c, poolOf(ns, name, 1))
	}
	paddock, err := sdk.New(suite.restConfig, sdk.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ runtime, template string }{{"gVisor", gvisor}, {"runc", runc}} {
		t.Run("sandbox on "+tc.runtime, func(t *testing.T) {
			sb, runArgv := claimFromPool(t, ctx, paddock, c, ns, tc.template)
			run := func(ctx context.Context, cmd string) (string, error) { return runArgv(ctx, "sh -c "+shellQuote(cmd)) }
			curl := func(args string) func(context.Context) (string, error) {
				return func(ctx context.Context) (string, error) { return run(ctx, "curl -sS -m 10 "+args) }
			}
			waitEgressApplied(t, c, ns, sb.SandboxName())
			mark := requestMark()
			expectOutput(t, "http://example.test/ before the kill", curl("http://example.test/?before="+mark), "hello from example.test")

			// The download, paced by the stand-in, in the background of this test.
			url := fmt.Sprintf("http://example.test/bytes/%d?rate=%d&download=%s", failDownloadSize, failDownloadRate, mark)
			type result struct {
				out string
				err error
			}
			downloaded := make(chan result, 1)
			go func() {
				out, err := run(ctx, "rm -f /tmp/download; curl -sS -m 120 -o /tmp/download '"+url+"'; echo curl-exit=$?")
				downloaded <- result{out, err}
			}()
			size := func(ctx context.Context) (int64, error) {
				out, err := run(ctx, "stat -c %s /tmp/download")
				if err != nil {
					return 0, err
				}
				return strconv.ParseInt(strings.TrimSpace(out), 10, 64)
			}
			framework.Eventually(t, func(ctx context.Context) error {
				n, err := size(ctx)
				if err != nil || n < failDownloadSeen {
					return fmt.Errorf("the download holds %d bytes (%v); waiting for %d", n, err, failDownloadSeen)
				}
				return nil
			})
			if !sawPath(t, ctx, stand, "/bytes/", mark) {
				t.Fatal("the stand-in never saw the download: it does not go where the test thinks")
			}

			pid, err := devcluster.KillEgress(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("killed paddock-egress (pid %d) mid-download", pid)
			// The leader of a killed process this test started (a restart) turns zombie before its
			// other threads have closed its sockets: wait for the port, never for a time.
			framework.EventuallyWithin(t, 30*time.Second, func(context.Context) error {
				if conn, err := net.DialTimeout("tcp", net.JoinHostPort(node, "15001"), 5*time.Second); err == nil {
					_ = conn.Close()
					return fmt.Errorf("the egress proxy's port on %s still accepts connections after its process is gone", node)
				}
				return nil
			})

			// The transfer fails: curl reports it, and the file is short.
			var res result
			select {
			case res = <-downloaded:
			case <-ctx.Done():
				t.Fatal("the download never ended after paddock-egress was killed")
			}
			exit := regexp.MustCompile(`curl-exit=(\d+)`).FindStringSubmatch(res.out)
			got, sizeErr := size(ctx)
			t.Logf("download after the kill: %q (%v), %d of %d bytes", strings.TrimSpace(res.out), res.err, got, failDownloadSize)
			switch {
			case res.err != nil || exit == nil:
				t.Errorf("the download command: %q, %v", res.out, res.err)
			case exit[1] == "0" || exit[1] == "28":
				t.Errorf("curl exit %s: the download went on (0: completed, 28: still running at its deadline) after paddock-egress died", exit[1])
			case sizeErr != nil || got >= failDownloadSize:
				t.Errorf("the download holds %d of %d bytes (%v); want it cut short", got, failDownloadSize, sizeErr)
			}

			// While it is down nothing leaves: the allowed host by name and by address, a denied
			// one by address, HTTPS, and DNS to the stand-in's own resolver.
			down := requestMark()
			for _, try := range []struct{ what, cmd string }{
				{"the allowed host by name", "curl -sS -m 10 http://example.test/?down=" + down},
				{"the allowed host by address", "curl -sS -m 10 -H 'Host: example.test' http://" + exampleIP + "/?down=" + down},
				{"the allowed host over HTTPS by address", "curl -sS -m 10 -k --resolve example.test:443:" + exampleIP + " https://example.test/?down=" + down},
				{"a denied host by address", "curl -sS -m 10 -H 'Host: other.test' http://" + otherIP + "/?down=" + down},
				{"DNS to the stand-in's resolver", "python3 -c " + shellQuote(dnsScript("udp", plan.Resolver.String(), "example.test"))},
			} {
				if out, err := run(ctx, try.cmd); err == nil {
					t.Errorf("while paddock-egress is down, %s succeeded: %q", try.what, out)
				}
			}
			if sawPath(t, ctx, stand, "", down) {
				t.Error("the stand-in served a request made while paddock-egress was down")
			}

			// A policed sandbox that starts while the component is down has no redirect at all:
			// its template's policed Pods' NetworkPolicy (egress.PolicedLabel) admits only the
			// egress ports, so it reaches nothing either.
			latePool := "late-" + tc.template
			late := poolOf(ns, latePool, 1)
			late.Spec.TemplateRef.Name = tc.template
			framework.MustCreate(t, ctx, c, late)
			lateSB, lateRun := claimFromPool(t, ctx, paddock, c, ns, latePool)
			if pod := sandboxPod(t, ns, lateSB.SandboxName()); pod.Labels[egress.PolicedLabel] != "true" {
				t.Errorf("the late sandbox's Pod is not labelled %s=true: %v", egress.PolicedLabel, pod.Labels)
			}
			lateMark := requestMark()
			for _, try := range []struct{ what, cmd string }{
				{"the allowed host by address", "curl -sS -m 10 -H 'Host: example.test' http://" + exampleIP + "/?late=" + lateMark},
				{"a denied host by address", "curl -sS -m 10 -H 'Host: other.test' http://" + otherIP + "/?late=" + lateMark},
				{"DNS to the stand-in's resolver", "python3 -c " + shellQuote(dnsScript("udp", plan.Resolver.String(), "example.test"))},
				{"a listener on the egress proxy's port at a pod's address", "curl -sS -m 10 http://" + listener + "/index.html"},
			} {
				if out, err := lateRun(ctx, "sh -c "+shellQuote(try.cmd)); err == nil {
					t.Errorf("a policed sandbox started while paddock-egress is down reached %s: %q", try.what, out)
				}
			}
			if sawPath(t, ctx, stand, "", lateMark) {
				t.Error("the stand-in served a request of a policed sandbox started while paddock-egress was down")
			}

			// Service returns with the component, under the same policy.
			pid, err = devcluster.StartEgress(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("paddock-egress started again (pid %d)", pid)
			up := requestMark()
			expectOutput(t, "http://example.test/ after the restart", curl("http://example.test/?up="+up), "hello from example.test")
			expectOutput(t, "other.test's address after the restart", curl("-H 'Host: other.test' http://"+otherIP+"/?up="+up), "is not allowed for this sandbox")
			if !sawPath(t, ctx, stand, "/?up=", up) {
				t.Error("the stand-in did not see the allowed request made after the restart")
			}
			// The late sandbox gets its policy from the restarted component.
			waitEgressApplied(t, c, ns, lateSB.SandboxName())
			expectOutput(t, "the late sandbox to http://example.test/ after the restart",
				func(ctx context.Context) (string, error) {
					return lateRun(ctx, "sh -c "+shellQuote("curl -sS -m 10 http://example.test/?up="+up))
				}, "hello from example.test")
			reqs, err := stand.Requests(ctx, "other.test")
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range reqs {
				if strings.Contains(r.Path, up) || strings.Contains(r.Path, down) {
					t.Errorf("other.test, which the policy denies, served %s %s from %s", r.Method, r.Path, r.Remote)
				}
			}
		})
	}
}

// sawPath reports whether any stand-in host logged a request whose path starts with prefix and
// holds mark.
func sawPath(t *testing.T, ctx context.Context, stand *standin.Client, prefix, mark string) bool {
	t.Helper()
	reqs, err := stand.Requests(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range reqs {
		if strings.HasPrefix(r.Path, prefix) && strings.Contains(r.Path, mark) {
			return true
		}
	}
	return false
}

// requestMark is a fresh token to find one step's requests in the stand-in's log.
func requestMark() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
