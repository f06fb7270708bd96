package reconcile

import (
	"fmt"
	"net/http"
	"time"
)

// JobSpec is a job as configured (the hookgate app's reconcile block),
// its durations read; Job builds the Job it runs.
type JobSpec struct {
	Name            string
	Truth, Receiver *SourceSpec
	// Expect maps a truth state to the receiver state it implies.
	Expect map[string]string
	// Grace leaves out rows updated within it; 0: DefaultGrace.
	Grace time.Duration
	// Every runs the job on a schedule; 0: only on demand.
	Every  time.Duration
	Repair *RepairSpec
}

// RepairSpec says where a job's corrective events go: one per missing or
// mismatched key, enqueued through the sender.
type RepairSpec struct {
	Destination string `json:"destination"`
	// EventType is the event's type; {state} is the truth state. Default
	// "{state}".
	EventType string `json:"event_type,omitempty"`
	// Limit bounds the events a scheduled run newly enqueues. Default 1000.
	Limit int `json:"limit,omitempty"`
}

// Check reports what the spec lacks or gets wrong, as the Caddyfile
// parser does, for JSON configs.
func (j *JobSpec) Check() error {
	switch {
	case j.Name == "":
		return fmt.Errorf("a job needs a name")
	case j.Truth == nil || j.Receiver == nil:
		return fmt.Errorf("needs a truth and a receiver")
	case len(j.Expect) == 0:
		return fmt.Errorf("needs at least one expect")
	case j.Every < 0 || (j.Every > 0 && j.Every < time.Second):
		return fmt.Errorf("every %s: want at least 1s", j.Every)
	case j.Grace < 0:
		return fmt.Errorf("grace %s: want a positive duration", j.Grace)
	case j.Repair != nil && j.Repair.Destination == "":
		return fmt.Errorf("repair needs a destination")
	case j.Repair != nil && j.Repair.Limit < 0:
		return fmt.Errorf("repair limit %d: want a positive integer", j.Repair.Limit)
	}
	if err := j.Truth.Check("truth"); err != nil {
		return err
	}
	return j.Receiver.Check("receiver")
}

// CheckJobs checks the jobs of one config: each (Check), their names
// unique, and each scheduled repair's destination known to
// hasDestination (one run on demand names its own).
func CheckJobs(jobs []*JobSpec, hasDestination func(name string) bool) error {
	names := map[string]bool{}
	for _, j := range jobs {
		if err := j.Check(); err != nil {
			return fmt.Errorf("reconcile %s: %w", j.Name, err)
		}
		if names[j.Name] {
			return fmt.Errorf("reconcile %s given twice", j.Name)
		}
		names[j.Name] = true
		if j.Every > 0 && j.Repair != nil && !hasDestination(j.Repair.Destination) {
			return fmt.Errorf("reconcile %s: repair destination %q is not configured", j.Name, j.Repair.Destination)
		}
	}
	return nil
}

// Job is the Job of j. At each run it checks j and builds the sources,
// their placeholders resolved by resolve.
func (j *JobSpec) Job(resolve func(string) (string, error)) *Job {
	job := &Job{Name: j.Name, Expect: j.Expect, Grace: j.Grace}
	if j.Repair != nil {
		job.EventType = j.Repair.EventType
	}
	job.Sources = func() (truth, receiver Source, err error) {
		if err := j.Check(); err != nil {
			return nil, nil, err
		}
		if truth, err = j.Truth.Source(resolve); err != nil {
			return nil, nil, fmt.Errorf("truth: %w", err)
		}
		if receiver, err = j.Receiver.Source(resolve); err != nil {
			return nil, nil, fmt.Errorf("receiver: %w", err)
		}
		return truth, receiver, nil
	}
	return job
}

// SourceSpec is one side of a job as configured: a PostgreSQL query, or
// an HTTP JSON endpoint. The DSN, URL and header values may hold
// placeholders, resolved at each run (Source).
type SourceSpec struct {
	Kind    string            `json:"kind"` // postgres or http
	DSN     string            `json:"dsn,omitempty"`
	Query   string            `json:"query,omitempty"`
	URL     string            `json:"url,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
}

// Check reports what the spec lacks, naming the side it is.
func (s *SourceSpec) Check(side string) error {
	switch {
	case s == nil:
		return fmt.Errorf("needs a truth and a receiver")
	case s.Kind == "postgres" && (s.DSN == "" || s.Query == ""):
		return fmt.Errorf("%s: postgres needs a DSN and a query", side)
	case s.Kind == "http" && s.URL == "":
		return fmt.Errorf("%s: http needs a URL", side)
	case s.Kind != "postgres" && s.Kind != "http":
		return fmt.Errorf("%s: unknown source %q (want postgres or http)", side, s.Kind)
	}
	return nil
}

// Source builds the source, its placeholders resolved by resolve.
func (s *SourceSpec) Source(resolve func(string) (string, error)) (Source, error) {
	switch s.Kind {
	case "postgres":
		dsn, err := resolve(s.DSN)
		if err != nil {
			return nil, fmt.Errorf("postgres DSN: %w", err)
		}
		return Postgres{DSN: dsn, Query: s.Query}, nil
	case "http":
		u, err := resolve(s.URL)
		if err != nil {
			return nil, fmt.Errorf("http URL: %w", err)
		}
		h := http.Header{}
		for k, v := range s.Headers {
			val, err := resolve(v)
			if err != nil {
				return nil, fmt.Errorf("http header %s: %w", k, err)
			}
			h.Set(k, val)
		}
		return HTTP{URL: u, Header: h}, nil
	}
	return nil, fmt.Errorf("unknown source %q (want postgres or http)", s.Kind)
}
