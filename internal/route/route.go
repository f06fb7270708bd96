// Package route is net/http's ServeMux with hookgate's own answers for a
// request no route takes: the router of the admin API and of the console.
//
// A Mux routes by ServeMux patterns ("GET /hookgate/dlq/{id}"). Where
// ServeMux would answer itself, in plain text, a Mux calls NotFound or
// MethodNotAllowed, which answer problem+json with a reason code:
//   - a path no pattern matches: 404;
//   - a path that patterns match only with other methods: 405, with
//     ServeMux's Allow header;
//   - a path ServeMux would redirect (to its cleaned form, or to add a
//     trailing slash a pattern ends with): 404, as a path no route takes.
//     A Mux never redirects: the console is mounted under a prefix that
//     ServeMux does not know, and the admin API's clients follow no
//     redirect. IDs that are "." or ".." travel escaped (package pathseg)
//     and are no path ServeMux cleans.
package route

import (
	"net/http"
	"strings"

	"github.com/hookgate/hookgate/internal/problem"
)

// A Mux is a ServeMux whose answers to a request no route takes are its
// own. The zero value answers them as problem+json, 404 not_found and 405
// method_not_allowed.
type Mux struct {
	mux http.ServeMux
	// NotFound answers a request no pattern takes. Nil: 404 not_found.
	NotFound http.HandlerFunc
	// MethodNotAllowed answers a request whose path patterns take only
	// with other methods; its Allow header is set already. Nil: 405
	// method_not_allowed.
	MethodNotAllowed http.HandlerFunc
}

// Handle registers h for pattern, as http.ServeMux.Handle does (a GET
// pattern takes HEAD too).
func (m *Mux) Handle(pattern string, h http.Handler) {
	m.mux.Handle(pattern, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := w.(*catcher)
		c.routed = true
		h.ServeHTTP(c.w, r)
	}))
}

// HandleFunc registers f for pattern.
func (m *Mux) HandleFunc(pattern string, f func(http.ResponseWriter, *http.Request)) {
	m.Handle(pattern, http.HandlerFunc(f))
}

// ServeHTTP routes r; a request no route takes is answered by NotFound or
// MethodNotAllowed.
func (m *Mux) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c := &catcher{w: w}
	m.mux.ServeHTTP(c, r)
	if c.routed {
		return
	}
	if c.status == http.StatusMethodNotAllowed {
		w.Header().Set("Allow", c.header.Get("Allow"))
		if m.MethodNotAllowed != nil {
			m.MethodNotAllowed(w, r)
			return
		}
		problem.Write(w, problem.MethodNotAllowed, problem.Truncate(r.Method, 40)+" is not allowed here", 0)
		return
	}
	if m.NotFound != nil {
		m.NotFound(w, r)
		return
	}
	problem.Write(w, problem.NotFound, "no such endpoint: "+problem.Truncate(r.Method, 40)+" "+problem.Truncate(r.URL.Path, 200), 0)
}

// catcher is the writer ServeMux is given: a route's handler writes
// through to w; ServeMux's own answer is caught, and dropped.
type catcher struct {
	w      http.ResponseWriter
	routed bool
	header http.Header
	status int
}

func (c *catcher) Header() http.Header {
	if c.header == nil {
		c.header = http.Header{}
	}
	return c.header
}

func (c *catcher) WriteHeader(status int) {
	if c.status == 0 {
		c.status = status
	}
}

func (c *catcher) Write(b []byte) (int, error) {
	c.WriteHeader(http.StatusOK)
	return len(b), nil
}

// Value is r's path wildcard name as ServeMux unescaped it, with each
// segment that package pathseg escaped ("%20." and "%20..", which ServeMux
// unescapes to " ." and " ..") read back as "." or "..". A {name...}
// wildcard may hold several segments.
func Value(r *http.Request, name string) string {
	v := r.PathValue(name)
	if !strings.Contains(v, " .") {
		return v
	}
	segs := strings.Split(v, "/")
	for i, s := range segs {
		if s == " ." || s == " .." {
			segs[i] = s[1:]
		}
	}
	return strings.Join(segs, "/")
}
