package standin

import (
	"context"
	"crypto/x509"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/net/dns/dnsmessage"
)

var network = netip.MustParsePrefix("198.19.64.0/24")

func TestNewPlan(t *testing.T) {
	p, err := NewPlan(network, []string{"Example.TEST.", "api.example.test", "example.test"})
	if err != nil {
		t.Fatal(err)
	}
	want := Plan{
		Network:  network,
		Gateway:  netip.MustParseAddr("198.19.64.1"),
		Resolver: netip.MustParseAddr("198.19.64.53"),
		Hosts: []Host{
			{Name: "example.test", Addr: netip.MustParseAddr("198.19.64.10")},
			{Name: "api.example.test", Addr: netip.MustParseAddr("198.19.64.11")},
		},
	}
	if diff := cmp.Diff(want, p, cmp.Comparer(func(a, b netip.Addr) bool { return a == b }), cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); diff != "" {
		t.Errorf("NewPlan (-want +got):\n%s", diff)
	}
	if h, ok := p.ByAddr(netip.MustParseAddr("198.19.64.11")); !ok || h.Name != "api.example.test" {
		t.Errorf("ByAddr(.11) = %v, %t; want api.example.test", h, ok)
	}
}

func TestPlanSkipsResolverAndStopsAtBroadcast(t *testing.T) {
	p, err := NewPlan(netip.MustParsePrefix("198.19.64.0/26"), nil)
	if err != nil {
		t.Fatal(err)
	}
	var addrs []string
	for i := 0; ; i++ {
		h, err := p.Add("h" + string(rune('a'+i%26)) + strings.Repeat("x", i/26) + ".test")
		if err != nil {
			if !strings.Contains(err.Error(), "no free address") {
				t.Fatalf("Add: %v, want a full range", err)
			}
			break
		}
		addrs = append(addrs, h.Addr.String())
	}
	// .10 to .62 less the resolver at .53; .63 is the broadcast.
	if len(addrs) != 52 || addrs[0] != "198.19.64.10" || addrs[len(addrs)-1] != "198.19.64.62" || strings.Contains(strings.Join(addrs, ","), "198.19.64.53,") {
		t.Errorf("hosts got %d addresses %v; want .10 to .62 without .53", len(addrs), addrs)
	}
}

func TestPlanRefuses(t *testing.T) {
	for _, tc := range []struct {
		network string
		names   []string
		want    string
	}{
		{"198.19.64.0/27", nil, "must be an IPv4 range of /26 or wider"},
		{"fd00::/64", nil, "must be an IPv4 range"},
		{"198.19.64.0/24", []string{"example.com"}, `"example.com" must end in .test`},
		{"198.19.64.0/24", []string{"test"}, "must end in .test"},
		{"198.19.64.0/24", []string{"-a.test"}, "must not start or end with a hyphen"},
		{"198.19.64.0/24", []string{"a_b.test"}, "may hold only letters, digits and hyphens"},
		{"198.19.64.0/24", []string{"a..test"}, "1 to 63 characters"},
	} {
		_, err := NewPlan(netip.MustParsePrefix(tc.network), tc.names)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewPlan(%s, %v) = %v, want an error containing %q", tc.network, tc.names, err, tc.want)
		}
	}
}

func query(t *testing.T, name string, typ dnsmessage.Type) []byte {
	t.Helper()
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: 4242, RecursionDesired: true})
	_ = b.StartQuestions()
	if err := b.Question(dnsmessage.Question{Name: dnsmessage.MustNewName(name), Type: typ, Class: dnsmessage.ClassINET}); err != nil {
		t.Fatal(err)
	}
	out, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestAnswer(t *testing.T) {
	p, err := NewPlan(network, DefaultHosts)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		typ     dnsmessage.Type
		rcode   dnsmessage.RCode
		answers []string
	}{
		{"example.test.", dnsmessage.TypeA, dnsmessage.RCodeSuccess, []string{"198.19.64.10"}},
		{"API.Example.Test.", dnsmessage.TypeA, dnsmessage.RCodeSuccess, []string{"198.19.64.11"}},
		{"example.test.", dnsmessage.TypeAAAA, dnsmessage.RCodeSuccess, nil},
		{"missing.test.", dnsmessage.TypeA, dnsmessage.RCodeNameError, nil},
		// Nothing is forwarded: a real name is unknown here.
		{"example.com.", dnsmessage.TypeA, dnsmessage.RCodeNameError, nil},
		{"kubernetes.default.svc.cluster.local.", dnsmessage.TypeA, dnsmessage.RCodeNameError, nil},
	} {
		resp := Answer(p, query(t, tc.name, tc.typ))
		var m dnsmessage.Message
		if err := m.Unpack(resp); err != nil {
			t.Fatalf("%s %s: unpack: %v", tc.name, tc.typ, err)
		}
		var got []string
		for _, a := range m.Answers {
			if r, ok := a.Body.(*dnsmessage.AResource); ok {
				got = append(got, netip.AddrFrom4(r.A).String())
			}
		}
		if m.ID != 4242 || !m.Response || m.RCode != tc.rcode || !cmp.Equal(tc.answers, got) {
			t.Errorf("%s %s = id %d response %t rcode %s answers %v; want id 4242, a response, %s, %v",
				tc.name, tc.typ, m.ID, m.Response, m.RCode, got, tc.rcode, tc.answers)
		}
	}
	if got := Answer(p, []byte{1, 2, 3}); got != nil {
		t.Errorf("Answer(garbage) = %x, want no answer", got)
	}
	var resp dnsmessage.Message
	_ = resp.Unpack(Answer(p, query(t, "example.test.", dnsmessage.TypeA)))
	packed, _ := resp.Pack()
	if got := Answer(p, packed); got != nil {
		t.Errorf("Answer(a response) = %x, want no answer (no reflection loops)", got)
	}
}

func TestCertificates(t *testing.T) {
	dir := t.TempDir()
	ca, err := ensureCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	again, err := ensureCA(dir)
	if err != nil || !again.Certificate().Equal(ca.Certificate()) {
		t.Fatalf("a second ensureCA made another CA (%v)", err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.Certificate())
	leaf, err := ca.issue(Host{Name: "api.example.test", Addr: netip.MustParseAddr("198.19.64.11")})
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(leaf.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cert.Verify(x509.VerifyOptions{DNSName: "api.example.test", Roots: roots}); err != nil {
		t.Errorf("the host's certificate does not verify against the CA: %v", err)
	}
	if _, err := cert.Verify(x509.VerifyOptions{DNSName: "example.test", Roots: roots}); err == nil {
		t.Errorf("api.example.test's certificate verifies for example.test")
	}
	// The CA is constrained to .test: even a certificate it signed for a real name is refused.
	outside, err := ca.issue(Host{Name: "example.com"})
	if err != nil {
		t.Fatal(err)
	}
	bad, _ := x509.ParseCertificate(outside.Certificate[0])
	if _, err := bad.Verify(x509.VerifyOptions{DNSName: "example.com", Roots: roots}); err == nil {
		t.Errorf("a certificate for example.com verifies against the stand-in CA; want the name constraint to refuse it")
	}
}

// /bytes/N sends exactly N bytes, paced or not, and names the parameter it refuses.
func TestBytes(t *testing.T) {
	srv := httptest.NewServer((&server{}).handler(Host{Name: "example.test"}))
	t.Cleanup(srv.Close)
	for _, tc := range []struct {
		path       string
		status     int
		size       int64
		errMessage string
	}{
		{path: "/bytes/100000", status: http.StatusOK, size: 100000},
		{path: "/bytes/0", status: http.StatusOK, size: 0},
		{path: "/bytes/300000?rate=4000000", status: http.StatusOK, size: 300000},
		{path: "/bytes/7?rate=1000000", status: http.StatusOK, size: 7},
		{path: "/bytes/-1", status: http.StatusBadRequest, errMessage: "/bytes/N: N must be 0 to"},
		{path: "/bytes/10?rate=0", status: http.StatusBadRequest, errMessage: `/bytes/N?rate=R: R is bytes a second, 1 to 1073741824; got "0"`},
		{path: "/bytes/10?rate=fast", status: http.StatusBadRequest, errMessage: `got "fast"`},
	} {
		resp, err := http.Get(srv.URL + tc.path)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if err != nil {
			t.Fatalf("GET %s: %v", tc.path, err)
		}
		if resp.StatusCode != tc.status {
			t.Errorf("GET %s = %s, want %d", tc.path, resp.Status, tc.status)
			continue
		}
		if tc.status != http.StatusOK {
			if !strings.Contains(string(body), tc.errMessage) {
				t.Errorf("GET %s said %q, want %q", tc.path, body, tc.errMessage)
			}
			continue
		}
		if int64(len(body)) != tc.size || resp.ContentLength != tc.size || strings.Trim(string(body), "\x00") != "" {
			t.Errorf("GET %s sent %d bytes (Content-Length %d), want %d zero bytes", tc.path, len(body), resp.ContentLength, tc.size)
		}
	}
}

// A paced download ends when its client goes away instead of writing on to N.
func TestPacedBytesStopWithTheClient(t *testing.T) {
	done := make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("/bytes/{n}", func(w http.ResponseWriter, r *http.Request) {
		defer close(done)
		serveBytes(w, r)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/bytes/1073741824?rate=100000", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(resp.Body, make([]byte, 1000)); err != nil {
		t.Fatal(err)
	}
	cancel()
	_ = resp.Body.Close()
	<-done // the handler returned: at 100 kB/s it would otherwise run for hours
}
