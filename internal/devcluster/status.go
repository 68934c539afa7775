package devcluster

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ComponentStatus is what `paddock dev status` reports for one component.
type ComponentStatus struct {
	Name  string
	PID   int // 0 when not running
	Ready bool
	// Detail says why it is not ready, or what it serves.
	Detail string
}

// Status probes every component once. Healthy reports whether all of them run and are ready.
func Status(ctx context.Context, cfg Config) (statuses []ComponentStatus, healthy bool) {
	cl := &cluster{cfg: cfg}
	if t, err := readTokens(cfg); err == nil {
		cl.tokens = t
	}
	if exists(cfg.KubeconfigPath()) {
		_, _, _ = cl.connect(ctx)
	}
	comps := cl.components()
	healthy = true
	for _, name := range componentOrder {
		if name == compEgress && cfg.process(name).pid() == 0 && !exists(cfg.path("bin", "paddock-egress")) {
			continue // up --install-paddock=false never starts it
		}
		st := ComponentStatus{Name: name, PID: cfg.process(name).pid()}
		if st.PID == 0 {
			st.Detail = "not running"
		} else {
			probeCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
			err := comps[name].ready(probeCtx)
			cancel()
			st.Ready = err == nil
			st.Detail = "ready"
			if err != nil {
				st.Detail = err.Error()
			}
		}
		healthy = healthy && st.Ready
		statuses = append(statuses, st)
	}
	gv := cl.gvisorStatus(ctx)
	healthy = healthy && gv.Ready
	statuses = append(statuses, gv)
	if cl.client != nil {
		st := ComponentStatus{Name: "kwok nodes"}
		list, err := cl.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: KWOKNodeLabelKey + "=" + KWOKNodeLabelValue})
		if err != nil {
			st.Detail = err.Error()
		} else {
			ready := 0
			for i := range list.Items {
				if cl.nodeReady(ctx, list.Items[i].Name) == nil {
					ready++
				}
			}
			st.Ready = ready == len(list.Items)
			st.Detail = fmt.Sprintf("%d of %d Ready", ready, len(list.Items))
		}
		healthy = healthy && st.Ready
		statuses = append(statuses, st)
	}
	return statuses, healthy
}

// PrintStatus writes statuses as a table.
func PrintStatus(w io.Writer, statuses []ComponentStatus) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "COMPONENT\tPID\tSTATE\tDETAIL")
	for _, s := range statuses {
		state, pid := "down", "-"
		if s.PID != 0 {
			pid = fmt.Sprint(s.PID)
			state = "unhealthy"
		}
		if s.Ready {
			state = "ready"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", s.Name, pid, state, s.Detail)
	}
	tw.Flush()
}
