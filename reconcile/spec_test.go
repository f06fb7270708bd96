package reconcile

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestJobSpecCheck: a JSON config gets the checks the Caddyfile
// parser makes, so a scheduled job cannot start without its sources.
func TestJobSpecCheck(t *testing.T) {
	good := func() *JobSpec {
		return &JobSpec{
			Name:     "j",
			Truth:    &SourceSpec{Kind: "postgres", DSN: "postgres://x", Query: "SELECT 1"},
			Receiver: &SourceSpec{Kind: "http", URL: "http://x"},
			Expect:   map[string]string{"a": "b"},
		}
	}
	if err := good().Check(); err != nil {
		t.Fatalf("a good job: %v", err)
	}
	for want, mutate := range map[string]func(j *JobSpec){
		"needs a truth":          func(j *JobSpec) { j.Truth = nil },
		"needs at least one":     func(j *JobSpec) { j.Expect = nil },
		"want at least 1s":       func(j *JobSpec) { j.Every = -1 },
		"repair needs":           func(j *JobSpec) { j.Repair = &RepairSpec{} },
		"receiver: http needs":   func(j *JobSpec) { j.Receiver.URL = "" },
		"truth: unknown source":  func(j *JobSpec) { j.Truth.Kind = "mysql" },
		"postgres needs a DSN":   func(j *JobSpec) { j.Truth.Query = "" },
		"a job needs a name":     func(j *JobSpec) { j.Name = "" },
		"want a positive durati": func(j *JobSpec) { j.Grace = -1 },
	} {
		j := good()
		mutate(j)
		if err := j.Check(); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v", want, err)
		}
	}
}

// TestCheckJobs: a config's jobs each pass Check, have names of their
// own, and a scheduled repair names a configured destination.
func TestCheckJobs(t *testing.T) {
	job := func(name string, every time.Duration, dest string) *JobSpec {
		j := &JobSpec{Name: name, Every: every, Expect: map[string]string{"a": "b"},
			Truth: &SourceSpec{Kind: "http", URL: "http://t"}, Receiver: &SourceSpec{Kind: "http", URL: "http://r"}}
		if dest != "" {
			j.Repair = &RepairSpec{Destination: dest}
		}
		return j
	}
	known := func(name string) bool { return name == "crm" }
	for _, tt := range []struct {
		jobs []*JobSpec
		want string
	}{
		{[]*JobSpec{job("a", time.Minute, "crm"), job("b", 0, "elsewhere")}, ""},
		{[]*JobSpec{job("a", 0, ""), job("a", 0, "")}, "reconcile a given twice"},
		{[]*JobSpec{job("a", time.Minute, "elsewhere")}, `reconcile a: repair destination "elsewhere" is not configured`},
		{[]*JobSpec{job("a", time.Millisecond, "")}, "reconcile a: every 1ms: want at least 1s"},
	} {
		err := CheckJobs(tt.jobs, known)
		if got := fmt.Sprint(err); (tt.want == "" && err != nil) || (tt.want != "" && got != tt.want) {
			t.Errorf("CheckJobs: %v, want %q", err, tt.want)
		}
	}
}
