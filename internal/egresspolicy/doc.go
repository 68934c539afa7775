// Package egresspolicy parses and validates a sandbox's egress policy (api/egress), and decides
// what it allows: a connection by destination address and the host name the client sent, a DNS
// question by name, and which headers a request to a host gets (docs/design/egress.md).
//
// Everything here is pure: no client, no context, no logging.
package egresspolicy
