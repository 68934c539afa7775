package devcluster

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// ownerFile names the state dir of the cluster that owns the machine-wide pieces: the node and
// bridge interfaces, the node address and the kubelet's iptables chains. Only one dev cluster
// runs per machine; the file keeps a second one (another --state-dir) from taking them over
// and its `down` from removing them.
var ownerFile = "/run/paddock-dev.owner"

// claimHost records cfg's state dir as the owner, unless a live cluster of another state dir
// owns the host.
func claimHost(cfg Config) error {
	owner, err := hostOwner()
	if err != nil {
		return err
	}
	if owner != "" && owner != cfg.StateDir && exists(owner) {
		other := Config{StateDir: owner}
		for _, name := range componentOrder {
			if other.process(name).pid() != 0 {
				return fmt.Errorf("another dev cluster (state dir %s) runs on this machine; stop it first with: paddock dev down --state-dir %s", owner, owner)
			}
		}
	}
	return os.WriteFile(ownerFile, []byte(cfg.StateDir+"\n"), 0o644)
}

func hostOwner() (string, error) {
	data, err := os.ReadFile(ownerFile)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return filepath.Clean(strings.TrimSpace(string(data))), nil
}

// ownsHost reports whether cfg's cluster owns the machine-wide pieces (or nobody does).
func ownsHost(cfg Config) bool {
	owner, err := hostOwner()
	return err == nil && (owner == "" || owner == cfg.StateDir)
}

// releaseHost removes the owner record if it is cfg's.
func releaseHost(cfg Config) error {
	if owner, err := hostOwner(); err != nil || owner != cfg.StateDir {
		return err
	}
	return os.Remove(ownerFile)
}
