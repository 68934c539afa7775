package cluster

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/paddock-dev/paddock/internal/standin"
)

// The egress attacker rows (issue 29): code in a sandbox looks for the credential an E2B rule
// injects and for the egress CA's private key, and a second sandbox tries to borrow the first
// one's egress identity. Called from testEgressRules, which holds the sandboxes.

// valueHiddenRows look for secret (a rule's header value) and keyFragment (a piece of the egress
// CA's private key) everywhere code in the sandbox can read. The search patterns bracket one
// character, so the command line that carries them never holds the text itself.
func valueHiddenRows(ctx context.Context, from string, run func(context.Context, string) (string, error), secret, keyFragment string) []attempt {
	var rows []attempt
	look := func(what, script string) {
		out, err := run(ctx, script)
		rows = append(rows, attempt{from: from, what: what, result: fmt.Sprintf("%s %v", out, err),
			held: !strings.Contains(out, secret) && !strings.Contains(out, keyFragment)})
	}
	look("read the rule's value from the environment", "env")
	look("read it from every process's environ and cmdline", "cat /proc/*/environ /proc/*/cmdline 2>/dev/null | tr '\\0' '\\n'")
	look("see it in the traffic of an injected request (curl -v over HTTPS)", "curl -sv -m 10 https://api.example.test/ 2>&1")
	look("have the allowed host echo the request's headers", "curl -s -m 10 -D - https://api.example.test/ 2>&1")
	// Every file but the kernel's views: a match lists the file, which the row then shows. A
	// control text written to a file first (base64 on the command line) must be the only match,
	// so the search is shown to find what is there.
	control := "control-" + hex.EncodeToString(randomBytes(8))
	grep := "echo " + base64.StdEncoding.EncodeToString([]byte(control)) + " | base64 -d > /tmp/grep-control && " +
		"grep -rsl --exclude-dir=proc --exclude-dir=sys --exclude-dir=dev -e " + shellQuote(bracketed(secret)) +
		" -e " + shellQuote(bracketed(keyFragment)) + " -e " + shellQuote(bracketed(control)) + " / ; echo searched"
	out, err := run(ctx, grep)
	rows = append(rows, attempt{from: from, what: "grep every file for the value and the egress CA's private key (the control file is found)",
		result: fmt.Sprintf("%s %v", out, err), held: err == nil && strings.Join(strings.Fields(out), " ") == "/tmp/grep-control searched"})
	return rows
}

// bracketed is s as a basic regular expression matching s, with one character in brackets.
func bracketed(s string) string {
	if len(s) < 2 {
		return s
	}
	return s[:1] + "[" + s[1:2] + "]" + s[2:]
}

// keyFragment is 32 characters from the body of a PEM private key: text the key's file holds
// and nothing else would.
func keyFragment(pemKey []byte) string {
	for _, line := range strings.Split(string(pemKey), "\n") {
		if len(line) >= 32 && !strings.HasPrefix(line, "-----") {
			return line[:32]
		}
	}
	return "no-key-" + hex.EncodeToString(randomBytes(8))
}

// trustRows are what the trust annotation (paddock.dev/trust-egress-ca) gives the sandbox: the
// mounted files hold certificates and no key, and the Pod's ServiceAccount token, if any is
// mounted, reads neither the installation's CA Secret nor the namespace's copy.
func trustRows(ctx context.Context, from string, run func(context.Context, string) (string, error), ns string) []attempt {
	out, err := run(ctx, "ls /etc/paddock/egress-ca; cat /etc/paddock/egress-ca/*")
	files := strings.HasPrefix(out, "ca-bundle.crt\nca.crt\n")
	rows := []attempt{{from: from, what: "read a private key from the mounted egress CA trust",
		result: fmt.Sprintf("%d bytes, listing %q, %v", len(out), strings.Join(strings.Fields(out)[:min(2, len(strings.Fields(out)))], " "), err),
		held:   err == nil && files && strings.Contains(out, "BEGIN CERTIFICATE") && !strings.Contains(out, "PRIVATE KEY")}}
	tok, err := run(ctx, "cat /var/run/secrets/kubernetes.io/serviceaccount/token 2>/dev/null")
	if err != nil || strings.TrimSpace(tok) == "" {
		return append(rows, attempt{from: from, what: "steal the Pod's ServiceAccount token to read the egress CA Secrets",
			result: fmt.Sprintf("no token mounted (%v)", err), held: true})
	}
	cfg := rest.AnonymousClientConfig(suite.restConfig)
	cfg.BearerToken = strings.TrimSpace(tok)
	cs, err := kubernetes.NewForConfig(cfg)
	for _, s := range []struct{ ns, name string }{{"paddock-system", "paddock-egress-ca"}, {ns, "paddock-egress-ca"}} {
		a := attempt{from: from, what: "get Secret " + s.ns + "/" + s.name + " with the Pod's ServiceAccount token"}
		if err != nil {
			a.result = err.Error()
		} else {
			_, gerr := cs.CoreV1().Secrets(s.ns).Get(ctx, s.name, metav1.GetOptions{})
			a.result, a.held = fmt.Sprint(gerr), apierrors.IsForbidden(gerr) || apierrors.IsUnauthorized(gerr)
		}
		rows = append(rows, a)
	}
	return rows
}

// identityTarget is the second sandbox (allowed example.test only, no rule) and what it aims at:
// the first sandbox's address and rule value, and api.example.test, which only the first may reach.
type identityTarget struct {
	from      string
	run       func(context.Context, string) (string, error)
	stand     *standin.Client
	victimIP  string
	value     string
	apiIP     string
	allowedIP string // example.test's address, which the attacker may reach by that name
	node      string
}

// egressIdentityRows try to make paddock-egress treat the attacker's traffic as the victim's:
// by name, by address with the victim's name in SNI and Host, with the victim's address in
// forwarding headers, through an address the attacker may reach, at the proxy's and the egress
// DNS's own ports, and with the victim's address as the packet source. Every request must be
// refused, and api.example.test must never see one of them, with or without the victim's value.
func egressIdentityRows(t *testing.T, ctx context.Context, x identityTarget) []attempt {
	t.Helper()
	nonce := hex.EncodeToString(randomBytes(6))
	path := func(i int) string { return fmt.Sprintf("/b-%s-%d", nonce, i) }
	spoof := fmt.Sprintf("-H 'X-Forwarded-For: %[1]s' -H 'Forwarded: for=%[1]s' -H 'X-Real-IP: %[1]s' ", x.victimIP)
	var rows []attempt
	refused := func(what, cmd string) {
		out, err := x.run(ctx, cmd)
		rows = append(rows, attempt{from: x.from, what: what, result: fmt.Sprintf("%s %v", out, err),
			held: !strings.Contains(out, "hello from api.example.test") && !strings.Contains(out, x.value)})
	}
	refused("ask for the victim's host by name", "curl -sS -m 10 https://api.example.test"+path(1))
	refused("HTTPS to the victim host's address with its name as SNI",
		"curl -sS -m 10 --resolve api.example.test:443:"+x.apiIP+" https://api.example.test"+path(2))
	refused("HTTP to the victim host's address, Host its name, the victim's address in X-Forwarded-For, Forwarded, X-Real-IP",
		"curl -sS -m 10 "+spoof+"--resolve api.example.test:80:"+x.apiIP+" http://api.example.test"+path(3))
	refused("Host api.example.test through example.test's address, which the attacker may reach",
		"curl -sS -m 10 "+spoof+"-H 'Host: api.example.test' http://"+x.allowedIP+path(4))
	refused("SNI api.example.test through example.test's address",
		"curl -sS -m 10 -k --resolve api.example.test:443:"+x.allowedIP+" https://api.example.test"+path(5))
	refused("the proxy's port on the node directly, Host api.example.test, forwarding headers naming the victim",
		"curl -sS -m 10 "+spoof+"-H 'Host: api.example.test' http://"+net.JoinHostPort(x.node, "15001")+path(6))
	for _, port := range []int{53, 15053} {
		out, err := x.run(ctx, "python3 -c "+shellQuote(dnsPortScript(x.node, port, "api.example.test")))
		rows = append(rows, attempt{from: x.from, what: fmt.Sprintf("resolve api.example.test at the node's port %d (the egress DNS)", port),
			result: fmt.Sprintf("%s %v", out, err), held: !strings.Contains(out, "rcode 0")})
	}
	out, err := x.run(ctx, "python3 -c "+shellQuote(spoofedSYNScript(x.victimIP, x.apiIP)))
	rows = append(rows, attempt{from: x.from, what: "send a SYN to api.example.test:80 with the victim's address as source",
		result: fmt.Sprintf("%s %v", out, err), held: !strings.Contains(out, "answered")})

	reqs, err := x.stand.Requests(ctx, "api.example.test")
	seen := 0
	for _, r := range reqs {
		if strings.HasPrefix(r.Path, "/b-"+nonce) {
			seen++
		}
	}
	rows = append(rows, attempt{from: x.from, what: "get any of these requests to api.example.test (with or without the victim's value)",
		result: fmt.Sprintf("api.example.test saw %d of them (%v)", seen, err), held: err == nil && seen == 0})
	return rows
}

// dnsPortScript is Python that sends one A query for name to server:port over UDP and prints
// "answered rcode N", or fails.
func dnsPortScript(server string, port int, name string) string {
	return fmt.Sprintf(`import socket, struct
q = struct.pack(">HHHHHH", 0x5150, 0x0100, 1, 0, 0, 0) + b"".join(bytes([len(l)]) + l.encode() for l in %q.split(".")) + b"\0" + struct.pack(">HH", 1, 1)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(5)
s.sendto(q, (%q, %d))
print("answered rcode", s.recv(512)[3] & 15)
`, name, server, port)
}

// spoofedSYNScript is Python that sends a TCP SYN from src to dst:80 on a raw socket and prints
// "answered" if a SYN-ACK comes back to the sender, "no raw socket" when it cannot open one, or
// "sent; no answer".
func spoofedSYNScript(src, dst string) string {
	return fmt.Sprintf(`import socket, struct, sys
src, dst = %q, %q
def csum(b):
    if len(b) %% 2:
        b += b"\0"
    s = sum(struct.unpack("!%%dH" %% (len(b) // 2), b))
    s = (s >> 16) + (s & 0xffff)
    s += s >> 16
    return ~s & 0xffff
try:
    s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_TCP)
    s.setsockopt(socket.IPPROTO_IP, socket.IP_HDRINCL, 1)
except OSError as e:
    print("no raw socket:", e)
    sys.exit(0)
tcp = struct.pack("!HHLLBBHHH", 40123, 80, 1, 0, 5 << 4, 0x02, 64240, 0, 0)
pseudo = socket.inet_aton(src) + socket.inet_aton(dst) + struct.pack("!BBH", 0, 6, len(tcp))
tcp = tcp[:16] + struct.pack("!H", csum(pseudo + tcp)) + tcp[18:]
ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp), 1, 0, 64, 6, 0, socket.inet_aton(src), socket.inet_aton(dst))
s.sendto(ip + tcp, (dst, 0))
s.settimeout(5)
try:
    while True:
        r = s.recv(65535)
        if r[12:16] == socket.inet_aton(dst) and struct.unpack("!H", r[20:22])[0] == 80:
            print("answered")
            break
except socket.timeout:
    print("sent; no answer")
`, src, dst)
}
