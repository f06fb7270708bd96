package integration

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// The same operation through every door hookgate has, on both stores: the
// answers must agree. Several findings of issue 17 were two doors that
// should have agreed and did not (a limit refused at one door and a 503 at
// another; a repair that was an error from the command and a warning from
// the schedule).

// outcome is a door's answer, reduced to what every door can say: a
// refusal's reason code, or what it did.
type outcome struct {
	Reason string   // "" when the operation was done
	IDs    []string // for a list: the IDs shown, sorted
	N      int      // for a dry run: how many match
}

// reasonRE finds a problem reason code in a command's output.
var reasonRE = regexp.MustCompile(`\b(bad_limit|bad_request|destination_orphaned|destination_configured|unknown_destination|not_found|bad_id|missing_idempotency_key|missing_event_type|malformed_json|empty_payload|key_reused_with_different_payload)\b`)

// consoleClient speaks to a console as a script would: it keeps the CSRF
// cookie, repeats its token in every form, and reads problem+json.
type consoleClient struct {
	base       string
	http       *http.Client
	token      string
	user, pass string // basic auth, when set
}

func newConsoleClient(t *testing.T, base string, userPass ...string) *consoleClient {
	jar, _ := cookiejar.New(nil)
	c := &consoleClient{base: base, http: &http.Client{Jar: jar, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	if len(userPass) == 2 {
		c.user, c.pass = userPass[0], userPass[1]
	}
	// Right after a config load, a new connection can land on the old
	// server as Caddy shuts it down, and see EOF: Caddy's hand-over, not
	// the console's. A client retries; so does this one, twice.
	var resp *http.Response
	var err error
	for try := 0; try < 3; try++ {
		req, _ := http.NewRequest(http.MethodGet, base+"/", nil)
		if c.user != "" {
			req.SetBasicAuth(c.user, c.pass)
		}
		if resp, err = c.http.Do(req); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	m := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("the console's overview has no CSRF token:\n%s", b)
	}
	c.token = string(m[1])
	return c
}

// do sends a request; a refusal is its problem's reason.
func (c *consoleClient) do(t *testing.T, method, path string, form url.Values) (int, string, string) {
	t.Helper()
	var body io.Reader
	if form != nil {
		form.Set("csrf", c.token)
		body = strings.NewReader(form.Encode())
	}
	req, _ := http.NewRequest(method, c.base+path, body)
	if c.user != "" {
		req.SetBasicAuth(c.user, c.pass)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	var p struct{ Reason string }
	if resp.StatusCode >= 300 {
		_ = json.Unmarshal(b, &p) // an error page that is not problem+json has no reason: "" compares as such
	}
	return resp.StatusCode, p.Reason, string(b)
}

// TestDoorsAgreeOnTheDeadLetterQueue runs each dead-letter operation
// through the admin API, the CLI and the console, on both stores.
func TestDoorsAgreeOnTheDeadLetterQueue(t *testing.T) {
	backends(t, func(t *testing.T, global string) {
		up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) { w.WriteHeader(400) })
		dest := func(name string) string {
			return fmt.Sprintf("destination %s {\n\t\t\turl %s\n\t\t\tsecret %s\n\t\t}", name, up.URL, devSecret)
		}
		withDests := func(dests ...string) string {
			return fmt.Sprintf("hookgate {\n\t\t%s\n\t\tsender {\n\t\t\tattempts 1\n\t\t\tmax_redrive 5\n\t\t}\n\t\t%s\n\t}",
				storeOf(global), strings.Join(dests, "\n\t\t"))
		}
		g := startGateway(t, "handle_path /console/* {\n\t\twebhook_console\n\t}", gatewayOptions{Global: withDests(dest("a"), dest("old"))})
		for _, e := range []struct{ dest, id string }{{"a", "a-1"}, {"a", "a-2"}, {"a", "a-3"}, {"old", "old-1"}} {
			body := fmt.Sprintf(`{"id":%q,"payload":{"n":1}}`, e.id)
			if st, _, got := post(t, g.Admin+"/hookgate/destinations/"+e.dest+"/enqueue", nil, []byte(body)); st != 202 {
				t.Fatalf("enqueue %s: %d %s", e.id, st, got)
			}
		}
		waitFor(t, "four dead letters", func() bool {
			out, _ := cli(t, g, "dlq", "summary", "--format", "json")
			return strings.Contains(out, `"total": 4`)
		})
		// "old" leaves the config: an orphan with one dead letter.
		caddyfile, err := os.ReadFile(g.Config)
		if err != nil {
			t.Fatal(err)
		}
		reload(t, g, strings.Replace(string(caddyfile), dest("old"), "", 1))
		console := newConsoleClient(t, g.URL+"/console")

		admin := func(method, path string, body any) outcome {
			t.Helper()
			var b []byte
			if body != nil {
				b, _ = json.Marshal(body)
			}
			req, _ := http.NewRequest(method, g.Admin+path, strings.NewReader(string(b)))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = resp.Body.Close() }()
			raw, _ := io.ReadAll(resp.Body)
			var v struct {
				Reason  string
				Matched int
				Entries []struct{ ID string }
			}
			if err := json.Unmarshal(raw, &v); err != nil {
				t.Fatalf("admin API answer %q: %v", raw, err)
			}
			o := outcome{Reason: v.Reason, N: v.Matched}
			for _, e := range v.Entries {
				o.IDs = append(o.IDs, e.ID)
			}
			slices.Sort(o.IDs)
			return o
		}
		command := func(args ...string) outcome {
			t.Helper()
			out, err := cli(t, g, args...)
			if err != nil {
				return outcome{Reason: reasonRE.FindString(out)}
			}
			var o outcome
			var v struct{ Entries []struct{ ID string } }
			if json.Unmarshal([]byte(out), &v) == nil {
				for _, e := range v.Entries {
					o.IDs = append(o.IDs, e.ID)
				}
				slices.Sort(o.IDs)
			}
			if m := regexp.MustCompile(`(\d+) dead letters? match`).FindStringSubmatch(out); m != nil {
				if _, err := fmt.Sscan(m[1], &o.N); err != nil {
					t.Fatal(err)
				}
			}
			return o
		}
		page := func(method, path string, form url.Values, ids ...string) outcome {
			t.Helper()
			st, reason, body := console.do(t, method, path, form)
			if st >= 300 {
				return outcome{Reason: reason}
			}
			var o outcome
			for _, id := range ids { // a page shows what it lists
				if strings.Contains(body, ">"+id+"<") {
					o.IDs = append(o.IDs, id)
				}
			}
			if m := regexp.MustCompile(`id="matched">(\d+)<`).FindStringSubmatch(body); m != nil && path == "/redrive" { // the preview
				if _, err := fmt.Sscan(m[1], &o.N); err != nil {
					t.Fatal(err)
				}
			}
			return o
		}
		redriveForm := func(dest, limit string) url.Values {
			return url.Values{"destination": {dest}, "limit": {limit}}
		}
		all := []string{"a-1", "a-2", "a-3", "old-1"}

		for _, tc := range []struct {
			name    string
			want    outcome
			admin   func() outcome
			cli     func() outcome
			console func() outcome
		}{{
			name: "a redrive over max_redrive",
			want: outcome{Reason: "bad_limit"},
			admin: func() outcome {
				return admin("POST", "/hookgate/dlq/redrive", map[string]any{"destination": "a", "limit": 6})
			},
			cli:     func() outcome { return command("dlq", "redrive", "--destination", "a", "--limit", "6") },
			console: func() outcome { return page("POST", "/redrive", redriveForm("a", "6")) },
		}, {
			name:    "a redrive without a limit",
			want:    outcome{Reason: "bad_limit"},
			admin:   func() outcome { return admin("POST", "/hookgate/dlq/redrive", map[string]any{"destination": "a"}) },
			cli:     func() outcome { return command("dlq", "redrive", "--destination", "a") },
			console: func() outcome { return page("POST", "/redrive", redriveForm("a", "0")) },
		}, {
			name: "a redrive of an orphan",
			want: outcome{Reason: "destination_orphaned"},
			admin: func() outcome {
				return admin("POST", "/hookgate/dlq/redrive", map[string]any{"destination": "old", "limit": 1})
			},
			cli:     func() outcome { return command("dlq", "redrive", "--destination", "old", "--limit", "1") },
			console: func() outcome { return page("POST", "/redrive", redriveForm("old", "1")) },
		}, {
			name: "a redrive of a destination that never was",
			want: outcome{Reason: "bad_request"},
			admin: func() outcome {
				return admin("POST", "/hookgate/dlq/redrive", map[string]any{"destination": "nope", "limit": 1})
			},
			cli:     func() outcome { return command("dlq", "redrive", "--destination", "nope", "--limit", "1") },
			console: func() outcome { return page("POST", "/redrive", redriveForm("nope", "1")) },
		}, {
			name: "a dry run",
			want: outcome{N: 3},
			admin: func() outcome {
				return admin("POST", "/hookgate/dlq/redrive", map[string]any{"destination": "a", "limit": 5, "dry_run": true})
			},
			cli:     func() outcome { return command("dlq", "redrive", "--destination", "a", "--limit", "5", "--dry-run") },
			console: func() outcome { return page("POST", "/redrive", redriveForm("a", "5")) },
		}, {
			name:    "the dead letters of a destination",
			want:    outcome{IDs: []string{"a-1", "a-2", "a-3"}},
			admin:   func() outcome { return admin("GET", "/hookgate/dlq?destination=a", nil) },
			cli:     func() outcome { return command("dlq", "list", "--destination", "a", "--format", "json") },
			console: func() outcome { return page("GET", "/dead?destination=a", nil, all...) },
		}, {
			name:    "the dead letters of an orphan",
			want:    outcome{IDs: []string{"old-1"}},
			admin:   func() outcome { return admin("GET", "/hookgate/dlq?destination=old", nil) },
			cli:     func() outcome { return command("dlq", "list", "--destination", "old", "--format", "json") },
			console: func() outcome { return page("GET", "/dead?destination=old", nil, all...) },
		}, {
			name:    "every dead letter",
			want:    outcome{IDs: all},
			admin:   func() outcome { return admin("GET", "/hookgate/dlq", nil) },
			cli:     func() outcome { return command("dlq", "list", "--format", "json") },
			console: func() outcome { return page("GET", "/dead", nil, all...) },
		}} {
			t.Run(tc.name, func(t *testing.T) {
				for door, f := range map[string]func() outcome{"admin API": tc.admin, "CLI": tc.cli, "console": tc.console} {
					if got := f(); fmt.Sprint(got) != fmt.Sprint(tc.want) {
						t.Errorf("%s: %+v, want %+v", door, got, tc.want)
					}
				}
			})
		}
		// Nothing above moved a letter.
		if out, _ := cli(t, g, "dlq", "summary", "--format", "json"); !strings.Contains(out, `"total": 4`) {
			t.Errorf("the refusals moved letters:\n%s", out)
		}
	})
}

// TestDoorsAgreeOnEnqueue: an event enqueued through webhook_enqueue and
// through the admin API gets the same answer for the same input, and so
// does an event fanned out through webhook_enqueue without a destination
// and through POST /hookgate/events; a repair
// through `hookgate reconcile --repair` and through the scheduled run
// gets the same counts (repaired, already repaired, unrepairable), on
// both stores.
func TestDoorsAgreeOnEnqueue(t *testing.T) {
	backends(t, func(t *testing.T, global string) {
		up := newUpstream(t, nil)
		// The truth: three reservations, one whose key cannot make a
		// delivery ID; the receiver holds none of them.
		page := func(items string) *httptest.Server {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = fmt.Fprintf(w, `{"items":[%s]}`, items)
			}))
			t.Cleanup(srv.Close)
			return srv
		}
		old := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
		truth := page(fmt.Sprintf(`{"key":"r 0","state":"confirmed","version":1,"updated_at":%q},
			{"key":"r-1","state":"confirmed","version":1,"updated_at":%q},
			{"key":"r-2","state":"confirmed","version":1,"updated_at":%q}`, old, old, old))
		receiver := page("")
		job := func(name, dest, every string) string {
			return fmt.Sprintf(`reconcile %s {
			truth    http %s
			receiver http %s
			expect   confirmed active
			%s
			repair {
				destination %s
				event_type  reservation.{state}
			}
		}`, name, truth.URL, receiver.URL, every, dest)
		}
		dest := func(name string) string {
			return fmt.Sprintf("destination %s {\n\t\t\turl %s\n\t\t\tsecret %s\n\t\t}", name, up.URL, devSecret)
		}
		subscriber := func(name, events string) string {
			return fmt.Sprintf("destination %s {\n\t\t\turl %s\n\t\t\tsecret %s\n\t\t\tevents %s\n\t\t}", name, up.URL, devSecret, events)
		}
		hookgate := fmt.Sprintf("hookgate {\n\t\t%s\n\t\t%s\n\t\t%s\n\t\t%s\n\t\t%s\n\t\t%s\n\t\t%s\n\t\t%s\n\t}", storeOf(global),
			dest("events"), dest("by-command"), dest("by-schedule"), subscriber("fan-a", "reservation.*"), subscriber("fan-b", "reservation.confirmed seat.*"),
			job("command", "by-command", ""), job("schedule", "by-schedule", "every 1s"))
		site := `handle /fan {
		webhook_enqueue {
			event_type {webhook.json.type}
		}
	}
	handle {
		webhook_enqueue events
	}`
		g := startGateway(t, site, gatewayOptions{Global: hookgate})

		// Enqueue: the handler and the admin API.
		type answer struct {
			Status    int
			Reason    string
			State     string
			Duplicate bool
		}
		handler := func(id, body string) answer {
			h := http.Header{"Content-Type": {"application/json"}}
			switch {
			case strings.ContainsAny(id, "\r\n"):
				// No HTTP client sends that in a header: in the body.
				b, _ := json.Marshal(id)
				body = `{"id":` + string(b) + `,` + strings.TrimPrefix(body, "{")
			case id != "":
				h.Set("Idempotency-Key", id)
			}
			st, hdr, got := post(t, g.URL, h, []byte(body))
			var a answer
			a.Status = st
			if st == 202 {
				if err := json.Unmarshal(got, &a); err != nil {
					t.Fatalf("a 202 answer %q: %v", got, err)
				}
			} else {
				a.Reason = problemBody(t, st, hdr, got)
			}
			return a
		}
		adminEnqueue := func(id, body string) answer {
			in, _ := json.Marshal(map[string]any{"id": id, "payload": json.RawMessage(body)})
			st, hdr, got := post(t, g.Admin+"/hookgate/destinations/events/enqueue", nil, in)
			var a answer
			a.Status = st
			if st == 202 {
				if err := json.Unmarshal(got, &a); err != nil {
					t.Fatalf("a 202 answer %q: %v", got, err)
				}
			} else {
				a.Reason = problemBody(t, st, hdr, got)
			}
			return a
		}
		for _, tc := range []struct {
			name, id, body string
			want           answer
		}{
			{"a new event", "evt-1", `{"n":1}`, answer{Status: 202, State: "queued"}},
			{"the same again", "evt-1", `{"n":1}`, answer{Status: 202, State: "queued", Duplicate: true}},
			{"the same ID, another payload", "evt-1", `{"n":2}`, answer{Status: 422, Reason: "key_reused_with_different_payload"}},
			{"an ID with a space", "evt 2", `{"n":1}`, answer{Status: 400, Reason: "bad_id"}},
			{"an ID with CR LF", "evt-3\r\nX-Evil: 1", `{"n":1}`, answer{Status: 400, Reason: "bad_id"}},
			{"an ID over 1 KiB", strings.Repeat("k", 1025), `{"n":1}`, answer{Status: 400, Reason: "bad_id"}},
			{"no ID", "", `{"n":1}`, answer{Status: 400, Reason: "missing_idempotency_key"}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				byHandler, byAdmin := handler(tc.id, tc.body), adminEnqueue(tc.id+"-admin", tc.body)
				if tc.id == "" {
					byAdmin = adminEnqueue("", tc.body)
				}
				if tc.name == "the same again" || tc.name == "the same ID, another payload" {
					byAdmin = adminEnqueue("evt-1", tc.body) // the handler's event, through the other door
					if tc.name == "the same again" {
						byAdmin.State = tc.want.State // delivered by now, or still queued
						byHandler.State = tc.want.State
					}
				}
				if tc.want.Status == 202 && tc.name == "a new event" {
					byAdmin.Duplicate = false
				}
				if byHandler != tc.want || byAdmin != tc.want {
					t.Errorf("webhook_enqueue %+v, admin API %+v; want both %+v", byHandler, byAdmin, tc.want)
				}
			})
		}

		// Fan-out: webhook_enqueue without a destination, and POST
		// /hookgate/events. The handler reads the type from the body, the
		// admin API from its event_type; the payload is the same bytes.
		type fanned struct {
			Status     int
			Reason     string
			Deliveries []string // destination, then " dup" for a duplicate
		}
		reduce := func(a fanAnswer) fanned {
			f := fanned{Status: a.Status, Reason: a.Reason}
			if a.Status == 202 {
				f.Deliveries = a.routed()
			}
			return f
		}
		fanBody := func(typ, n string) string {
			if typ == "" {
				return `{"n":` + n + `}`
			}
			return `{"type":"` + typ + `","n":` + n + `}`
		}
		fanHandler := func(id, typ, n string) fanned { return reduce(publish(t, g.URL+"/fan", id, fanBody(typ, n))) }
		fanAdmin := func(id, typ, n string) fanned { return reduce(publishAdmin(t, g, id, typ, fanBody(typ, n))) }
		for _, tc := range []struct {
			name, id, typ, n string
			want             fanned
		}{
			{"a new event", "fan-1", "reservation.confirmed", "1", fanned{Status: 202, Deliveries: []string{"fan-a", "fan-b"}}},
			{"the same again", "fan-1", "reservation.confirmed", "1", fanned{Status: 202, Deliveries: []string{"fan-a dup", "fan-b dup"}}},
			{"the same ID, another payload", "fan-1", "reservation.confirmed", "2", fanned{Status: 422, Reason: "key_reused_with_different_payload"}},
			{"one subscriber", "fan-2", "seat.released", "1", fanned{Status: 202, Deliveries: []string{"fan-b"}}},
			{"no subscriber", "fan-3", "invoice.paid", "1", fanned{Status: 202, Deliveries: []string{}}},
			{"no event type", "fan-4", "", "1", fanned{Status: 400, Reason: "missing_event_type"}},
			{"an ID with a space", "fan 5", "reservation.confirmed", "1", fanned{Status: 400, Reason: "bad_id"}},
			{"no ID", "", "reservation.confirmed", "1", fanned{Status: 400, Reason: "missing_idempotency_key"}},
		} {
			t.Run("fan-out: "+tc.name, func(t *testing.T) {
				adminID := tc.id + "-admin"
				switch {
				case tc.id == "":
					adminID = ""
				case strings.HasPrefix(tc.name, "the same"):
					adminID = tc.id // the handler's event, through the other door
				}
				byHandler, byAdmin := fanHandler(tc.id, tc.typ, tc.n), fanAdmin(adminID, tc.typ, tc.n)
				if !cmp.Equal(byHandler, tc.want) || !cmp.Equal(byAdmin, tc.want) {
					t.Errorf("webhook_enqueue %+v, POST /hookgate/events %+v; want both %+v", byHandler, byAdmin, tc.want)
				}
			})
		}

		// Repairs: the command and the schedule, each on its own
		// destination, over the same truth.
		type counts struct{ Repaired, Already, Unrepairable int }
		fromCommand := func() counts {
			t.Helper()
			code, out, errOut := reconcileCmd(t, nil, "--config", g.Config, "--job", "command", "--repair", "--address", strings.TrimPrefix(g.Admin, "http://"))
			if code != 1 {
				t.Fatalf("reconcile --repair: exit %d, want 1 (drift)\n%s%s", code, out, errOut)
			}
			var c counts
			m := regexp.MustCompile(`(\d+) repairs? enqueued(?:, (\d+) already enqueued by an earlier run)?(?:, (\d+) unrepairable)?`).FindStringSubmatch(out)
			if m == nil {
				t.Fatalf("no repair counts in:\n%s", out)
			}
			if _, err := fmt.Sscan(m[1], &c.Repaired); err != nil {
				t.Fatal(err)
			}
			if m[2] != "" {
				if _, err := fmt.Sscan(m[2], &c.Already); err != nil {
					t.Fatal(err)
				}
			}
			if m[3] != "" {
				if _, err := fmt.Sscan(m[3], &c.Unrepairable); err != nil {
					t.Fatal(err)
				}
			}
			return c
		}
		scheduled := func(after int) counts {
			t.Helper()
			var c counts
			waitFor(t, "a scheduled run", func() bool {
				lines := regexp.MustCompile(`\{[^\n]*"msg":"reconcile found drift"[^\n]*\}`).FindAllString(g.logs.String(), -1)
				if len(lines) <= after {
					return false
				}
				var v struct {
					Job          string `json:"job"`
					Repaired     int    `json:"repaired"`
					Already      int    `json:"already_repaired"`
					Unrepairable int    `json:"unrepairable"`
				}
				if err := json.Unmarshal([]byte(lines[after]), &v); err != nil {
					t.Fatalf("log line %s: %v", lines[after], err)
				}
				c = counts{v.Repaired, v.Already, v.Unrepairable}
				return true
			})
			return c
		}
		first, firstScheduled := fromCommand(), scheduled(0)
		if want := (counts{Repaired: 2, Unrepairable: 1}); first != want || firstScheduled != want {
			t.Errorf("first runs: the command %+v, the schedule %+v; want both %+v", first, firstScheduled, want)
		}
		again, againScheduled := fromCommand(), scheduled(1)
		if want := (counts{Already: 2, Unrepairable: 1}); again != want || againScheduled != want {
			t.Errorf("second runs: the command %+v, the schedule %+v; want both %+v", again, againScheduled, want)
		}
	})
}

// TestScopedConsoleResumesOnlyItsOwnPause: a console scoped to a
// subscriber resumes a pause that subscriber made, never one its operator
// made (or a 410), on both stores; the operator resumes any.
func TestScopedConsoleResumesOnlyItsOwnPause(t *testing.T) {
	backends(t, func(t *testing.T, global string) {
		up := newUpstream(t, nil)
		hash, err := exec.Command(binary, "hash-password", "--plaintext", "pw-a").Output()
		if err != nil {
			t.Fatal(err)
		}
		hookgate := fmt.Sprintf("hookgate {\n\t\t%s\n\t\tdestination a {\n\t\t\turl %s\n\t\t\tsecret %s\n\t\t}\n\t}", storeOf(global), up.URL, devSecret)
		site := fmt.Sprintf(`handle_path /my/* {
		basic_auth {
			a %s
		}
		webhook_console {
			destination {http.auth.user.id}
		}
	}`, strings.TrimSpace(string(hash)))
		g := startGateway(t, site, gatewayOptions{Global: hookgate})
		mine := newConsoleClient(t, g.URL+"/my", "a", "pw-a")
		state := func() (string, string) {
			d := destinationsOf(t, g)["a"]
			by, _ := d["paused_by"].(string)
			return d["state"].(string), by
		}

		if out, err := cli(t, g, "destinations", "pause", "a"); err != nil {
			t.Fatal(err, out)
		}
		if st, reason, _ := mine.do(t, "POST", "/destinations/a/resume", url.Values{}); st != 403 || reason != "resume_not_allowed" {
			t.Errorf("the subscriber's resume of the operator's pause: %d %s; want 403 resume_not_allowed", st, reason)
		}
		if s, by := state(); s != "paused" || strings.HasPrefix(by, "subscriber") {
			t.Errorf("after the refused resume: %s by %q; want the operator's pause kept", s, by)
		}
		if out, err := cli(t, g, "destinations", "resume", "a"); err != nil {
			t.Fatal(err, out)
		}

		if st, reason, _ := mine.do(t, "POST", "/destinations/a/pause", url.Values{}); st != 303 {
			t.Fatalf("the subscriber's pause: %d %s", st, reason)
		}
		if s, by := state(); s != "paused" || by != "subscriber:a" {
			t.Errorf("after the subscriber's pause: %s by %q; want paused by subscriber:a", s, by)
		}
		if st, reason, _ := mine.do(t, "POST", "/destinations/a/resume", url.Values{}); st != 303 {
			t.Errorf("the subscriber's resume of its own pause: %d %s", st, reason)
		}
		if s, _ := state(); s != "active" {
			t.Errorf("after the subscriber's resume: %s", s)
		}
	})
}
