package proxy

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
)

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("dial tcp: %w", errPolicy), "policy"},
		{context.Canceled, "canceled"},
		{context.DeadlineExceeded, "timeout"},
		{&net.OpError{Op: "read", Err: os.ErrDeadlineExceeded}, "timeout"},
		{&net.OpError{Op: "dial", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}, "refused"},
		{&net.OpError{Op: "dial", Err: os.NewSyscallError("connect", syscall.EHOSTUNREACH)}, "dial"},
		{&net.DNSError{Err: "no such host", Name: "sb.ns.svc.cluster.local", IsNotFound: true}, "dial"},
		{io.EOF, "eof"},
		{fmt.Errorf("readLoopPeekFailLocked: %w", io.ErrUnexpectedEOF), "eof"},
		{&net.OpError{Op: "read", Err: os.NewSyscallError("read", syscall.ECONNRESET)}, "eof"},
		{tls.RecordHeaderError{Msg: "tls: first record does not look like a TLS handshake"}, "tls"},
		{errors.New("something else"), "other"},
	} {
		if got := Classify(tc.err); got != tc.want {
			t.Errorf("Classify(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}
