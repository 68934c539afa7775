// Package certauthority is a small ECDSA P-256 certificate authority kept in PEM: it makes a CA
// (optionally limited to DNS names under given domains, as a name constraint), reads one back
// from its certificate and key, and issues short-lived TLS server certificates for a name or
// an address. The egress proxy's per-installation CA (internal/egressproxy) and the internet
// stand-in's CA (internal/standin) are both made with it; where the key is kept is theirs.
package certauthority
