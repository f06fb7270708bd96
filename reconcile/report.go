package reconcile

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

// RunReport is one run's report as `hookgate reconcile` prints it; its
// JSON form is the command's JSON report.
type RunReport struct {
	Job      string `json:"job"`
	Compared struct {
		Truth    int `json:"truth"`
		Receiver int `json:"receiver"`
	} `json:"compared"`
	Drift    map[string]int `json:"drift"`
	Samples  []RunSample    `json:"samples"`
	Repaired int            `json:"repaired"`
	// Unrepairable counts, with repairs, the missing or mismatched keys
	// that cannot make a valid delivery ID: reported, never enqueued.
	Unrepairable    int     `json:"unrepairable"`
	DurationSeconds float64 `json:"duration_seconds"`
	// Already counts the repairs an earlier run enqueued (table only).
	Already int `json:"-"`
}

// RunSample is one drift of a RunReport; an absent state is nil (null).
type RunSample struct {
	Key           string  `json:"key"`
	Kind          string  `json:"kind"`
	TruthState    *string `json:"truth_state"`
	ReceiverState *string `json:"receiver_state"`
}

// NewRunReport is the report of a run of job that took took: r its
// comparison, rep its repairs (nil without). The samples are in key
// order.
func NewRunReport(job string, r *Report, rep *Repairer, took time.Duration) RunReport {
	out := RunReport{Job: job, Drift: map[string]int{}, Samples: []RunSample{}, DurationSeconds: took.Seconds()}
	out.Compared.Truth, out.Compared.Receiver = r.Compared.Truth, r.Compared.Receiver
	if rep != nil {
		out.Repaired, out.Unrepairable, out.Already = rep.Repaired, rep.Unrepairable, rep.Already
	}
	for k, n := range r.Drift {
		out.Drift[string(k)] = n
	}
	for _, d := range r.Samples {
		s := RunSample{Key: d.Key, Kind: string(d.Kind)}
		if d.Truth != nil {
			s.TruthState = &d.Truth.State
		}
		if d.Receiver != nil {
			s.ReceiverState = &d.Receiver.State
		}
		out.Samples = append(out.Samples, s)
	}
	sort.SliceStable(out.Samples, func(i, k int) bool { return out.Samples[i].Key < out.Samples[k].Key })
	return out
}

// Print writes the report to w as format: "json" (one line: a cron log
// of runs is JSON Lines) or "table". w is a terminal or a log: a failed
// write has no one to tell, so write errors are dropped.
func (r RunReport) Print(w io.Writer, format string) {
	if format == "json" {
		b, _ := json.Marshal(r)
		_, _ = fmt.Fprintln(w, string(b))
		return
	}
	_, _ = fmt.Fprintf(w, "job %s: compared %d truth rows, %d receiver rows in %.1fs\n", r.Job, r.Compared.Truth, r.Compared.Receiver, r.DurationSeconds)
	_, _ = fmt.Fprintf(w, "drift: %d missing, %d mismatched, %d orphaned; %d repairs enqueued", r.Drift["missing"], r.Drift["mismatched"], r.Drift["orphaned"], r.Repaired)
	if r.Already > 0 {
		_, _ = fmt.Fprintf(w, ", %d already enqueued by an earlier run", r.Already)
	}
	if r.Unrepairable > 0 {
		_, _ = fmt.Fprintf(w, ", %d unrepairable (no valid delivery ID)", r.Unrepairable)
	}
	_, _ = fmt.Fprintln(w)
	if len(r.Samples) == 0 {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	_, _ = fmt.Fprintln(tw, "KEY\tKIND\tTRUTH\tRECEIVER")
	state := func(s *string) string {
		if s == nil {
			return "-"
		}
		return *s
	}
	for _, s := range r.Samples {
		_, _ = fmt.Fprintln(tw, strings.Join([]string{s.Key, s.Kind, state(s.TruthState), state(s.ReceiverState)}, "\t"))
	}
	_ = tw.Flush()
}

// PrintUnrepairable writes a warning to w for each of rep's unrepairable
// samples, and one for the rest. As with Print, write errors are dropped.
func PrintUnrepairable(w io.Writer, rep *Repairer) {
	for _, s := range rep.UnrepairableSamples {
		_, _ = fmt.Fprintf(w, "warning: key %q not repaired: %v\n", s.Key, s.Err)
	}
	if more := rep.Unrepairable - len(rep.UnrepairableSamples); more > 0 {
		_, _ = fmt.Fprintf(w, "warning: %d more keys not repaired: they cannot make a valid delivery ID\n", more)
	}
}
