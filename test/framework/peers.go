package framework

import (
	"net"
	"os"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// DialAsUID connects to addr (an IP literal and port) with a socket owned by uid, as a process
// of that user would: the socket is made on a thread whose filesystem uid is uid, which is what
// the kernel records as its owner. It needs root (CAP_SETUID); without it the test is skipped.
func DialAsUID(t testing.TB, uid int, addr string) net.Conn {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skipf("needs root to make a socket owned by uid %d; run as root (CI does)", uid)
	}
	type result struct {
		conn net.Conn
		err  error
	}
	done := make(chan result, 1)
	go func() {
		// The thread is never unlocked, so it ends with this goroutine and its uid with it.
		runtime.LockOSThread()
		_, _ = unix.SetfsuidRetUid(uid)
		if got, _ := unix.SetfsuidRetUid(-1); got != uid {
			done <- result{err: os.ErrPermission}
			return
		}
		c, err := net.Dial("tcp", addr)
		done <- result{c, err}
	}()
	r := <-done
	if r.err != nil {
		t.Fatalf("dialing %s as uid %d: %v", addr, uid, r.err)
	}
	t.Cleanup(func() { _ = r.conn.Close() })
	return r.conn
}
