package process

import (
	"sort"
	"strings"
)

// MergeEnv returns base ("K=V" entries) with each layer applied in order; a later layer wins on a
// duplicate name. Names keep the position of their first appearance so the result is stable.
func MergeEnv(base []string, layers ...map[string]string) []string {
	index := make(map[string]int, len(base))
	out := make([]string, 0, len(base))
	set := func(name, entry string) {
		if i, ok := index[name]; ok {
			out[i] = entry
			return
		}
		index[name] = len(out)
		out = append(out, entry)
	}
	for _, kv := range base {
		name, _, _ := strings.Cut(kv, "=")
		set(name, kv)
	}
	for _, layer := range layers {
		names := make([]string, 0, len(layer))
		for name := range layer {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			set(name, name+"="+layer[name])
		}
	}
	return out
}
