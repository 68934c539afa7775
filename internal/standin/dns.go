package standin

import (
	"golang.org/x/net/dns/dnsmessage"
)

// dnsTTL is the TTL of every answer: short, so a host added later resolves at once.
const dnsTTL = 5

// Answer builds the response to one DNS query against the plan: an A record for a known host,
// an empty NOERROR for its other types, NXDOMAIN for any other name (nothing is forwarded), and
// FORMERR for what does not parse as a query. It returns nil for a message that is itself a
// response, which a server must not answer.
func Answer(p Plan, query []byte) []byte {
	var parser dnsmessage.Parser
	h, err := parser.Start(query)
	if err != nil {
		return nil
	}
	if h.Response {
		return nil
	}
	resp := dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true, OpCode: h.OpCode, RecursionDesired: h.RecursionDesired}
	q, err := parser.Question()
	if err != nil || h.OpCode != 0 {
		resp.RCode = dnsmessage.RCodeFormatError
		if h.OpCode != 0 {
			resp.RCode = dnsmessage.RCodeNotImplemented
		}
		return build(resp, nil, nil)
	}
	host, known := p.Lookup(q.Name.String())
	if !known {
		resp.RCode = dnsmessage.RCodeNameError
		return build(resp, &q, nil)
	}
	var answer *dnsmessage.AResource
	if q.Type == dnsmessage.TypeA && q.Class == dnsmessage.ClassINET {
		answer = &dnsmessage.AResource{A: host.Addr.As4()}
	}
	return build(resp, &q, answer)
}

func build(h dnsmessage.Header, q *dnsmessage.Question, a *dnsmessage.AResource) []byte {
	b := dnsmessage.NewBuilder(nil, h)
	b.EnableCompression()
	if q != nil {
		_ = b.StartQuestions()
		_ = b.Question(*q)
		if a != nil {
			_ = b.StartAnswers()
			_ = b.AResource(dnsmessage.ResourceHeader{Name: q.Name, Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET, TTL: dnsTTL}, *a)
		}
	}
	out, err := b.Finish()
	if err != nil {
		return nil
	}
	return out
}
