package reconcile

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestRunReport: the command's report, as a table and as one line of
// JSON; samples in key order, an absent state a dash or null.
func TestRunReport(t *testing.T) {
	r, err := Compare(t.Context(),
		rows{row("a", "confirmed"), row("c", "confirmed")},
		rows{row("b", "active"), row("c", "pending")},
		Config{Expect: expect, Now: now}, nil)
	if err != nil {
		t.Fatal(err)
	}
	rep := &Repairer{Repaired: 1, Already: 2, Unrepairable: 3}
	out := NewRunReport("enrollments", r, rep, 1500*time.Millisecond)
	for format, want := range map[string]string{
		"table": "job enrollments: compared 2 truth rows, 2 receiver rows in 1.5s\n" +
			"drift: 1 missing, 1 mismatched, 1 orphaned; 1 repairs enqueued, 2 already enqueued by an earlier run, 3 unrepairable (no valid delivery ID)\n" +
			"KEY  KIND        TRUTH      RECEIVER\n" +
			"a    missing     confirmed  -\n" +
			"b    orphaned    -          active\n" +
			"c    mismatched  confirmed  pending\n",
		"json": `{"job":"enrollments","compared":{"truth":2,"receiver":2},"drift":{"mismatched":1,"missing":1,"orphaned":1},` +
			`"samples":[{"key":"a","kind":"missing","truth_state":"confirmed","receiver_state":null},` +
			`{"key":"b","kind":"orphaned","truth_state":null,"receiver_state":"active"},` +
			`{"key":"c","kind":"mismatched","truth_state":"confirmed","receiver_state":"pending"}],` +
			`"repaired":1,"unrepairable":3,"duration_seconds":1.5}` + "\n",
	} {
		var b bytes.Buffer
		out.Print(&b, format)
		if diff := cmp.Diff(want, b.String()); diff != "" {
			t.Errorf("%s (-want +got):\n%s", format, diff)
		}
	}
}

// TestRunReportClean: no drift and no repairs is two lines, and JSON with
// every count at zero and an empty list of samples.
func TestRunReportClean(t *testing.T) {
	r, err := Compare(t.Context(), rows{}, rows{}, Config{Expect: expect}, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := NewRunReport("j", r, nil, 0)
	for format, want := range map[string]string{
		"table": "job j: compared 0 truth rows, 0 receiver rows in 0.0s\ndrift: 0 missing, 0 mismatched, 0 orphaned; 0 repairs enqueued\n",
		"json":  `{"job":"j","compared":{"truth":0,"receiver":0},"drift":{"mismatched":0,"missing":0,"orphaned":0},"samples":[],"repaired":0,"unrepairable":0,"duration_seconds":0}` + "\n",
	} {
		var b bytes.Buffer
		out.Print(&b, format)
		if diff := cmp.Diff(want, b.String()); diff != "" {
			t.Errorf("%s (-want +got):\n%s", format, diff)
		}
	}
}

func TestPrintUnrepairable(t *testing.T) {
	rep := &Repairer{Unrepairable: 3, UnrepairableSamples: []UnrepairableSample{{Key: "b c", Err: errors.New("bad id")}}}
	var b bytes.Buffer
	PrintUnrepairable(&b, rep)
	want := "warning: key \"b c\" not repaired: bad id\nwarning: 2 more keys not repaired: they cannot make a valid delivery ID\n"
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
