package headers

import (
	"net/http"
	"testing"
)

// FuzzParse feeds arbitrary header values to Parse. Whatever comes in, Parse must not panic, must
// return either a target or one of the contract's error texts, and an accepted target must satisfy
// every invariant the proxy relies on.
func FuzzParse(f *testing.F) {
	f.Add("sb-1", "default", "8888", "", "", "")
	f.Add("a", "team", "65535", "198.18.0.9", "uid-1", "30.5")
	f.Add("", "", "", "", "", "")
	f.Add("a", "", "0", "169.254.169.254", "", "-1")
	f.Fuzz(func(t *testing.T, id, ns, port, podIP, uid, timeout string) {
		h := http.Header{}
		for k, v := range map[string]string{SandboxID: id, SandboxNamespace: ns, SandboxPort: port,
			SandboxPodIP: podIP, SandboxUID: uid, SandboxTimeout: timeout} {
			if v != "" {
				h.Set(k, v)
			}
		}
		got, err := Parse(h, Policy{})
		if err != nil {
			switch err.Detail {
			case MsgIDRequired, MsgInvalidID, MsgInvalidNamespace, MsgInvalidPort, MsgInvalidPodIP, MsgInvalidTimeout:
			default:
				t.Fatalf("unknown error text %q", err.Detail)
			}
			if got != (Target{}) {
				t.Fatalf("error %q came with a non-empty target %+v", err.Detail, got)
			}
			return
		}
		if !isDNSLabel(got.Name) || !isDNSLabel(got.Namespace) {
			t.Fatalf("accepted invalid name %q or namespace %q", got.Name, got.Namespace)
		}
		if got.Port < 1 || got.Port > 65535 {
			t.Fatalf("accepted port %d", got.Port)
		}
		if got.PodIP.IsValid() && !Dialable(got.PodIP, Policy{}) {
			t.Fatalf("accepted undialable pod IP %s", got.PodIP)
		}
		if got.PodIP.IsLoopback() || got.PodIP.IsLinkLocalUnicast() || got.PodIP.Is4In6() {
			t.Fatalf("accepted pod IP %s", got.PodIP)
		}
		if got.Timeout < 0 {
			t.Fatalf("accepted negative timeout %s", got.Timeout)
		}
	})
}
