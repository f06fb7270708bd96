package reconcile

import (
	"fmt"
	"net/http"
)

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
