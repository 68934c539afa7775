package standin

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
)

// Attach links the stand-in whose process is pid to the host: a veth pair with HostInterface on
// the host (holding the gateway address, so the host routes the stand-in range there) and eth0
// in the process's network namespace. A link already present is kept: it dies with the
// namespace, so one that exists belongs to the running stand-in.
func Attach(pid int, network netip.Prefix) error {
	p, err := NewPlan(network, nil)
	if err != nil {
		return err
	}
	if _, err := net.InterfaceByName(HostInterface); err != nil {
		if err := ip("link", "add", HostInterface, "type", "veth", "peer", "name", innerInterface, "netns", strconv.Itoa(pid)); err != nil {
			return fmt.Errorf("link the stand-in (pid %d) to the host: %w", pid, err)
		}
	}
	if err := ip("addr", "replace", p.Gateway.String()+"/"+strconv.Itoa(p.Network.Bits()), "dev", HostInterface); err != nil {
		return err
	}
	return ip("link", "set", HostInterface, "up")
}

// Detach removes the host's end of the link, and with it the route to the stand-in range. The
// namespace goes when its process exits.
func Detach() error {
	if _, err := net.InterfaceByName(HostInterface); err != nil {
		return nil
	}
	if err := ip("link", "del", HostInterface); err != nil {
		return errors.Join(fmt.Errorf("remove the stand-in's link"), err)
	}
	return nil
}
