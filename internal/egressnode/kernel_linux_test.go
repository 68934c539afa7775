package egressnode

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"golang.org/x/net/dns/dnsmessage"
	"golang.org/x/sys/unix"

	"github.com/paddock-dev/paddock/internal/egresspolicy"
	"github.com/paddock-dev/paddock/internal/egressproxy"
)

// netns is a network namespace of the test's own, held by one locked OS thread: work that must
// happen inside it (sockets, iptables, ip) runs on that thread. The namespace goes with the
// thread when the test ends, with every address, route and rule the test added in it.
type netns struct {
	fns chan func()
	tid int
}

func newNetns(t *testing.T) *netns {
	t.Helper()
	n := &netns{fns: make(chan func())}
	ready := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread, and its namespace, end with the goroutine
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			ready <- err
			return
		}
		n.tid = unix.Gettid()
		ready <- nil
		for f := range n.fns {
			f()
		}
	}()
	if err := <-ready; err != nil {
		t.Skipf("cannot make a network namespace (needs root): %v", err)
	}
	t.Cleanup(func() { close(n.fns) })
	return n
}

// do runs f inside the namespace.
func (n *netns) do(f func() error) error {
	done := make(chan error, 1)
	n.fns <- func() { done <- f() }
	return <-done
}

func (n *netns) sh(t *testing.T, cmds ...string) {
	t.Helper()
	for _, c := range cmds {
		args := strings.Fields(c)
		if err := n.do(func() error {
			out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
			if err != nil {
				return fmt.Errorf("%s: %w: %s", c, err, out)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestNodeRedirectsAPolicedPod builds a node and a pod, each a network namespace joined by a
// veth pair, installs the component's rules in the node for the pod's address, and checks
// from the pod what the kernel does: TCP reaches only what the policy allows, through the
// proxy (which learns the destination from SO_ORIGINAL_DST); DNS to any resolver is answered
// by the egress DNS; UDP elsewhere and the node's other ports are dropped.
func TestNodeRedirectsAPolicedPod(t *testing.T) {
	for _, tool := range []string{"ip", "iptables", "iptables-restore"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed: %v", tool, err)
		}
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root for network namespaces and iptables")
	}
	node, pod := newNetns(t), newNetns(t)
	const podIP, nodeIP = "198.18.250.2", "198.18.250.1"
	node.sh(t,
		"ip link set lo up",
		"ip link add veth-node type veth peer name veth-pod netns "+strconv.Itoa(pod.tid),
		"ip addr add "+nodeIP+"/30 dev veth-node",
		"ip link set veth-node up",
		// The test's internet: two addresses on the node's loopback, one allowed, one not.
		"ip addr add 203.0.113.7/32 dev lo",
		"ip addr add 203.0.113.8/32 dev lo",
	)
	pod.sh(t,
		"ip link set lo up",
		"ip addr add "+podIP+"/30 dev veth-pod",
		"ip link set veth-pod up",
		"ip route add default via "+nodeIP,
	)

	ports := Ports{Proxy: 15001, DNS: 15053}
	ca, err := egressproxy.NewCA("test")
	if err != nil {
		t.Fatal(err)
	}
	// The proxy's own connections start in the node's namespace, as they would on a node.
	inNode := func(ctx context.Context, network, addr string) (c net.Conn, err error) {
		err = node.do(func() error {
			c, err = (&net.Dialer{}).DialContext(ctx, network, addr)
			return err
		})
		return c, err
	}
	srv, err := egressproxy.New(egressproxy.Config{
		OriginalDst: OriginalDst, UpstreamDNS: "127.0.0.1:9", CA: ca, PeekTimeout: 200 * time.Millisecond, Dial: inNode,
		Log: testr.NewWithOptions(t, testr.Options{Verbosity: 1}),
	})
	if err != nil {
		t.Fatal(err)
	}
	pol, err := egresspolicy.Parse(`{"allow":["203.0.113.7"],"deny":["0.0.0.0/0"]}`)
	if err != nil {
		t.Fatal(err)
	}
	srv.Set(netip.MustParseAddr(podIP), &egressproxy.Sandbox{ID: "ns/sb", Policy: pol})

	var allowed, denied, proxyL net.Listener
	var udp net.PacketConn
	if err := node.do(func() error {
		var err error
		if proxyL, err = net.Listen("tcp", fmt.Sprintf(":%d", ports.Proxy)); err != nil {
			return err
		}
		go func() { _ = srv.Serve(proxyL) }()
		pc, err := net.ListenPacket("udp", fmt.Sprintf(":%d", ports.DNS))
		if err != nil {
			return err
		}
		go func() { _ = srv.ServeDNS(pc) }()
		if allowed, err = net.Listen("tcp", "203.0.113.7:80"); err != nil {
			return err
		}
		if denied, err = net.Listen("tcp", "203.0.113.8:80"); err != nil {
			return err
		}
		udp, err = net.ListenPacket("udp", "203.0.113.8:9999")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	seen := make(chan string, 4)
	for _, l := range []net.Listener{allowed, denied} {
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				seen <- l.Addr().String() + " from " + c.RemoteAddr().(*net.TCPAddr).IP.String()
				_, _ = io.WriteString(c, "banner\n")
				_ = c.Close()
			}
		}()
	}
	fwRules := &IPTables{Ports: ports}
	if err := node.do(func() error { return fwRules.Sync(context.Background(), []netip.Addr{netip.MustParseAddr(podIP)}) }); err != nil {
		t.Fatal(err)
	}

	dial := func(addr string) (string, error) {
		var line string
		err := pod.do(func() error {
			c, err := net.DialTimeout("tcp", addr, 10*time.Second)
			if err != nil {
				return err
			}
			defer func() { _ = c.Close() }()
			_ = c.SetDeadline(time.Now().Add(10 * time.Second))
			line, err = bufio.NewReader(c).ReadString('\n')
			return err
		})
		return line, err
	}
	t.Run("allowed address, through the proxy", func(t *testing.T) {
		line, err := dial("203.0.113.7:80")
		if err != nil || line != "banner\n" {
			t.Fatalf("got %q %v", line, err)
		}
		// The destination saw the node, not the pod: the connection went through the proxy.
		if got := <-seen; strings.HasSuffix(got, "from "+podIP) {
			t.Fatalf("destination saw %s, want a connection from the node's proxy", got)
		}
	})
	t.Run("denied address", func(t *testing.T) {
		if line, err := dial("203.0.113.8:80"); err == nil {
			t.Fatalf("got %q, want the connection refused", line)
		}
	})
	t.Run("the node's own ports", func(t *testing.T) {
		if _, err := dial(nodeIP + ":22"); err == nil {
			t.Fatal("reached the node's port 22")
		}
	})
	t.Run("DNS to any resolver is the egress DNS", func(t *testing.T) {
		var m dnsmessage.Message
		if err := pod.do(func() error {
			c, err := net.Dial("udp", "8.8.8.8:53")
			if err != nil {
				return err
			}
			defer func() { _ = c.Close() }()
			q := dnsmessage.Message{Header: dnsmessage.Header{ID: 3, RecursionDesired: true},
				Questions: []dnsmessage.Question{{Name: dnsmessage.MustNewName("exfil.example.test."), Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET}}}
			out, _ := q.Pack()
			if _, err := c.Write(out); err != nil {
				return err
			}
			_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
			buf := make([]byte, 512)
			n, err := c.Read(buf)
			if err != nil {
				return err
			}
			return m.Unpack(buf[:n])
		}); err != nil {
			t.Fatal(err)
		}
		if m.RCode != dnsmessage.RCodeNameError || m.ID != 3 {
			t.Fatalf("got %v, want NXDOMAIN from the egress DNS", m.Header)
		}
	})
	t.Run("UDP elsewhere is dropped", func(t *testing.T) {
		before := dropCount(t, node, InputChain, podIP)
		if err := pod.do(func() error {
			c, err := net.Dial("udp", "203.0.113.8:9999")
			if err != nil {
				return err
			}
			defer func() { _ = c.Close() }()
			_, err = c.Write([]byte("leak"))
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if after := dropCount(t, node, InputChain, podIP); after != before+1 {
			t.Fatalf("the drop rule counted %d packets, then %d; want one more", before, after)
		}
		_ = udp.SetReadDeadline(time.Now())
		if n, _, err := udp.ReadFrom(make([]byte, 16)); err == nil {
			t.Fatalf("the UDP listener got %d bytes", n)
		}
	})
	t.Run("with the proxy down, nothing", func(t *testing.T) {
		_ = proxyL.Close()
		if line, err := dial("203.0.113.7:80"); err == nil {
			t.Fatalf("got %q with the proxy down, want the connection refused", line)
		}
	})
	select {
	case got := <-seen:
		t.Errorf("a refused destination got a connection: %s", got)
	default:
	}
	if err := node.do(func() error { return Cleanup(context.Background()) }); err != nil {
		t.Fatal(err)
	}
	if err := node.do(func() error { return exec.Command("iptables", "-t", "nat", "-S", NATChain).Run() }); err == nil {
		t.Error("Cleanup left the nat chain")
	}
}

// dropCount reads the packet counter of the chain's DROP rule for src.
func dropCount(t *testing.T, n *netns, chain, src string) int {
	t.Helper()
	var out []byte
	if err := n.do(func() error {
		var err error
		out, err = exec.Command("iptables", "-w", "-t", "mangle", "-L", chain, "-v", "-x", "-n").Output()
		return err
	}); err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) >= 8 && f[2] == "DROP" && f[7] == src {
			n, err := strconv.Atoi(f[0])
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no DROP rule for %s in %s:\n%s", src, chain, out)
	return 0
}
