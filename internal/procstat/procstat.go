// Package procstat reads a process's /proc/PID/stat: the CPU times and start time that the dev
// cluster and the benchmarks read.
package procstat

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// UserHZ is the unit of the CPU times and the start time in /proc (USER_HZ): 100 on every Linux
// ABI Go supports.
const UserHZ = 100

// Stat is what this project reads of /proc/PID/stat, times in UserHZ ticks.
type Stat struct {
	// State is the process state (R, S, D, Z, X, ...).
	State string
	// User and System are the process's own CPU times (fields 14 and 15); ChildUser and
	// ChildSystem those of the children it has waited for (16 and 17).
	User, System, ChildUser, ChildSystem uint64
	// Start is when the process started, since boot (field 22): with the pid, it names one
	// process even when the pid is reused.
	Start uint64
}

// Parse reads the contents of a /proc/PID/stat file. The command name (field 2) may hold spaces
// and parentheses; the fields after it follow its last ')'.
func Parse(data []byte) (Stat, error) {
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return Stat{}, fmt.Errorf("malformed stat: no ')' after the command name")
	}
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 20 {
		return Stat{}, fmt.Errorf("malformed stat: %d fields after the command name, want at least 20", len(f))
	}
	// f[0] is field 3 (the state): field n is f[n-3].
	var n [5]uint64
	for k, field := range []int{14, 15, 16, 17, 22} {
		v, err := strconv.ParseUint(f[field-3], 10, 64)
		if err != nil {
			return Stat{}, fmt.Errorf("malformed stat: field %d %q: %w", field, f[field-3], err)
		}
		n[k] = v
	}
	return Stat{State: f[0], User: n[0], System: n[1], ChildUser: n[2], ChildSystem: n[3], Start: n[4]}, nil
}

// Read reads /proc/PID/stat under procRoot (/proc).
func Read(procRoot string, pid int) (Stat, error) {
	data, err := os.ReadFile(filepath.Join(procRoot, strconv.Itoa(pid), "stat"))
	if err != nil {
		return Stat{}, err
	}
	s, err := Parse(data)
	if err != nil {
		return Stat{}, fmt.Errorf("%s/%d/stat: %w", procRoot, pid, err)
	}
	return s, nil
}

// Running reports whether the process is neither a zombie nor dead.
func (s Stat) Running() bool { return s.State != "Z" && s.State != "X" }

// CPU is the process's own CPU time.
func (s Stat) CPU() time.Duration { return ticks(s.User + s.System) }

// Reaped is the CPU time of the children the process has waited for.
func (s Stat) Reaped() time.Duration { return ticks(s.ChildUser + s.ChildSystem) }

func ticks(n uint64) time.Duration { return time.Duration(n) * time.Second / UserHZ }
