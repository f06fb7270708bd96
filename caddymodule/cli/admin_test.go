package cli

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// fakeAdmin is an admin API that answers each "METHOD path?query" from
// answers (a problem answer, 404, for any other) and records what it was
// sent.
type fakeAdmin struct {
	*httptest.Server
	mu   sync.Mutex
	sent []string // "METHOD path?query body"
}

func newFakeAdmin(t *testing.T, answers map[string]string) *fakeAdmin {
	t.Helper()
	a := &fakeAdmin{}
	a.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		req := r.Method + " " + r.URL.RequestURI()
		a.mu.Lock()
		a.sent = append(a.sent, strings.TrimSpace(req+" "+string(body)))
		a.mu.Unlock()
		answer, ok := answers[req]
		switch {
		case !ok:
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, `{"status":404,"detail":"no such thing","reason":"not_found"}`)
		case strings.HasPrefix(answer, "500 "):
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = io.WriteString(w, strings.TrimPrefix(answer, "500 "))
		default:
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, answer)
		}
	}))
	t.Cleanup(a.Close)
	return a
}

// requests returns what the admin API was sent since the last call.
func (a *fakeAdmin) requests() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	sent := a.sent
	a.sent = nil
	return sent
}

// TestAdminCommands runs dlq, destinations, dedupe and freshness against
// an admin API: what each sends, prints, and exits with (0, or 1 and
// "Error: ..." on error).
func TestAdminCommands(t *testing.T) {
	t.Setenv("USER", "tester")
	admin := newFakeAdmin(t, map[string]string{
		"GET /hookgate/dlq/summary?":                                   `{"groups":[{"destination":"d1","class":"http_5xx","count":3,"oldest_dead_at":"0001-01-01T00:00:00Z"}],"total":3}`,
		"GET /hookgate/dlq/summary?class=gone":                         `{"groups":[],"total":0}`,
		"GET /hookgate/dlq?cursor=c1&destination=d1&id=a&id=b&limit=5": `{"entries":[{"id":"e1","destination":"d1","event_type":"t","class":"http_5xx","last_status":503,"attempts":4,"dead_at":"2024-01-02T03:04:05Z","last_error":"` + strings.Repeat("x", 80) + `"}],"next_cursor":"c2"}`,
		"GET /hookgate/dlq/e%2F1?destination=d1":                       `{"id":"e/1"}`,
		"POST /hookgate/dlq/redrive":                                   `{"redrive_id":"r1","matched":5,"moved":3}`,
		"GET /hookgate/redrives/r1":                                    `{"redrive_id":"r1","moved":3}`,
		"POST /hookgate/dlq/purge":                                     `{"removed":7}`,
		"GET /hookgate/destinations":                                   `{"destinations":[{"name":"d1","state":"active","source":"caddyfile","breaker":"","ordering":"entity","on_dead":"hold","depth":{"queued":1,"leased":2,"paused":0,"dead":3,"waiting":1,"held":1},"oldest_ready_age_seconds":12.4},{"name":"d2","state":"active","source":"api","breaker":"closed","depth":{"queued":0,"leased":0,"paused":0,"dead":0},"oldest_ready_age_seconds":0}]}`,
		"POST /hookgate/destinations/d1/pause":                         `{"name":"d1","state":"paused"}`,
		"POST /hookgate/destinations/o1/move":                          `{"moved":4,"kept":1}`,
		"POST /hookgate/destinations/o1/purge":                         `{"removed":2}`,
		"GET /hookgate/dedupe/k%2F1":                                   `{"key":"k/1","state":"recorded","status":200,"body_omitted":false,"body_bytes":17,"fingerprint":"sha256:ab12","expires_at":"2026-01-31T12:00:00Z"}`,
		"DELETE /hookgate/dedupe/k1":                                   `{}`,
		"GET /hookgate/freshness/e1":                                   `{"entity":"e1","event_time":{"watermark":"2026-01-31T11:00:00Z","expires_at":"2026-02-07T11:00:00Z","lease_until":null},"sequence":{"watermark":null,"lease_until":"2026-01-31T12:00:30Z"}}`,
		"POST /hookgate/destinations/broken/resume":                    "500 boom",
	})
	addr := "--address=" + strings.TrimPrefix(admin.URL, "http://")
	for _, tc := range []struct {
		args   []string
		sent   []string
		stdout string
		code   int
		stderr string
	}{
		{
			args: []string{"dlq", "summary", addr},
			sent: []string{"GET /hookgate/dlq/summary?"},
			stdout: "DESTINATION  CLASS     COUNT  OLDEST\n" +
				"d1           http_5xx  3      -\n" +
				"total: 3\n",
		},
		{
			args:   []string{"dlq", "summary", "--class", "gone", "--format", "json", addr},
			sent:   []string{"GET /hookgate/dlq/summary?class=gone"},
			stdout: "{\n  \"groups\": [],\n  \"total\": 0\n}\n",
		},
		{
			args: []string{"dlq", "list", "--destination", "d1", "--id", "a", "--id", "b", "--limit", "5", "--cursor", "c1", "--address", admin.URL + "/"},
			sent: []string{"GET /hookgate/dlq?cursor=c1&destination=d1&id=a&id=b&limit=5"},
			stdout: "ID  DESTINATION  TYPE  CLASS     STATUS  ATTEMPTS  DEAD AT               LAST ERROR\n" +
				"e1  d1           t     http_5xx  503     4         2024-01-02T03:04:05Z  " + strings.Repeat("x", 60) + "…\n" +
				"more: --cursor 'c2'\n",
		},
		{
			args:   []string{"dlq", "show", "e/1", "--destination", "d1", addr},
			sent:   []string{"GET /hookgate/dlq/e%2F1?destination=d1"},
			stdout: "{\n  \"id\": \"e/1\"\n}\n",
		},
		{
			args:   []string{"dlq", "redrive", "--limit", "3", "--class", "http_5xx", addr},
			sent:   []string{`POST /hookgate/dlq/redrive {"destination":"","class":"http_5xx","since":"","until":"","ids":[],"limit":3,"dry_run":false,"by":"cli: tester"}`},
			stdout: "redrive r1: 5 matched, 3 moved back to the queue\nwatch: hookgate dlq redrive --status r1\n",
		},
		{
			args:   []string{"dlq", "redrive", "--status", "r1", addr},
			sent:   []string{"GET /hookgate/redrives/r1"},
			stdout: "{\n  \"redrive_id\": \"r1\",\n  \"moved\": 3\n}\n",
		},
		{
			args:   []string{"dlq", "purge", "--id", "e1", addr},
			sent:   []string{`POST /hookgate/dlq/purge {"destination":"","class":"","since":"","until":"","ids":["e1"],"limit":0,"dry_run":false,"by":"cli: tester","all":false}`},
			stdout: "7 dead letters removed\n",
		},
		{
			args: []string{"destinations", "list", addr},
			sent: []string{"GET /hookgate/destinations"},
			stdout: "NAME  SOURCE     STATE   BREAKER  ORDERING     QUEUED  LEASED  PAUSED  DEAD  WAITING  HELD  OLDEST READY\n" +
				"d1    caddyfile  active  -        entity/hold  1       2       0       3     1        1     12s\n" +
				"d2    api        active  closed   -            0       0       0       0     0        0     -\n",
		},
		{
			args:   []string{"destinations", "pause", "d1", addr},
			sent:   []string{"POST /hookgate/destinations/d1/pause"},
			stdout: "d1: paused\n",
		},
		{
			args:   []string{"destinations", "move", "o1", "d1", addr},
			sent:   []string{`POST /hookgate/destinations/o1/move {"to":"d1"}`},
			stdout: "moved 4 from o1 to d1; 1 kept in o1: d1 holds their IDs with another payload\n",
		},
		{
			args:   []string{"destinations", "purge", "o1", "--format", "json", addr},
			sent:   []string{"POST /hookgate/destinations/o1/purge"},
			stdout: "{\n  \"removed\": 2\n}\n",
		},
		{
			args: []string{"dedupe", "show", "k/1", addr},
			sent: []string{"GET /hookgate/dedupe/k%2F1"},
			stdout: "KEY  STATE     STATUS  BODY      FINGERPRINT  EXPIRES               LEASE UNTIL\n" +
				"k/1  recorded  200     17 bytes  sha256:ab12  2026-01-31T12:00:00Z  -\n",
		},
		{
			args:   []string{"dedupe", "show", "k/1", addr, "--format", "json"},
			sent:   []string{"GET /hookgate/dedupe/k%2F1"},
			stdout: "{\n  \"key\": \"k/1\",\n  \"state\": \"recorded\",\n  \"status\": 200,\n  \"body_omitted\": false,\n  \"body_bytes\": 17,\n  \"fingerprint\": \"sha256:ab12\",\n  \"expires_at\": \"2026-01-31T12:00:00Z\"\n}\n",
		},
		{
			args:   []string{"dedupe", "forget", "k1", addr},
			sent:   []string{"DELETE /hookgate/dedupe/k1"},
			stdout: "k1 forgotten: its next copy is forwarded as new\n",
		},
		{
			args: []string{"freshness", "show", "e1", addr},
			sent: []string{"GET /hookgate/freshness/e1"},
			stdout: "entity e1\n" +
				"BY          WATERMARK             EXPIRES               LEASE UNTIL\n" +
				"event_time  2026-01-31T11:00:00Z  2026-02-07T11:00:00Z  -\n" +
				"sequence    -                     -                     2026-01-31T12:00:30Z\n",
		},
		{
			args:   []string{"freshness", "show", "e1", addr, "--format", "json"},
			sent:   []string{"GET /hookgate/freshness/e1"},
			stdout: "{\n  \"entity\": \"e1\",\n  \"event_time\": {\n    \"watermark\": \"2026-01-31T11:00:00Z\",\n    \"expires_at\": \"2026-02-07T11:00:00Z\",\n    \"lease_until\": null\n  },\n  \"sequence\": {\n    \"watermark\": null,\n    \"lease_until\": \"2026-01-31T12:00:30Z\"\n  }\n}\n",
		},

		// Errors: exit 1, "Error: ..." once on the error output.
		{
			args:   []string{"dedupe", "forget", "absent", addr},
			sent:   []string{"DELETE /hookgate/dedupe/absent"},
			code:   1,
			stderr: "Error: no such thing (404 not_found)\n",
		},
		{
			args:   []string{"destinations", "resume", "broken", addr},
			sent:   []string{"POST /hookgate/destinations/broken/resume"},
			code:   1,
			stderr: "Error: 500 Internal Server Error: boom\n",
		},
		{args: []string{"dlq", "redrive", addr}, code: 1, stderr: "Error: redrive needs --limit N, N at least 1: release a bounded batch, then watch it (bad_limit)\n"},
		{args: []string{"dlq", "show", addr}, code: 1, stderr: "Error: show needs a delivery ID\n"},
		{args: []string{"dlq", "bogus", addr}, code: 1, stderr: "Error: unknown dlq command \"bogus\": want summary, list, show, redrive or purge\n"},
		{args: []string{"dlq", "summary", "--format", "yaml", addr}, code: 1, stderr: "Error: --format \"yaml\": want table or json\n"},
		{args: []string{"dlq", "a", "b", "c"}, code: 1, stderr: "Error: accepts between 1 and 2 arg(s), received 3\n"},
		{args: []string{"dlq", "--nope", "summary"}, code: 1, stderr: "Error: unknown flag: --nope\n"},
		{args: []string{"destinations", "move", "o1", addr}, code: 1, stderr: "Error: move needs the orphan and the configured destination to move to\n"},
		{args: []string{"destinations", "bogus", addr}, code: 1, stderr: "Error: unknown destinations command \"bogus\": want list, pause, resume, move, purge, create, update, rotate or delete\n"},
		{args: []string{"freshness", "forget", "e1", addr}, code: 1, stderr: "Error: unknown freshness command \"forget\"\n"},
		{args: []string{"dedupe", "show"}, code: 1, stderr: "Error: accepts 2 arg(s), received 1\n"},
		{
			args:   []string{"dlq", "summary", "--address", "127.0.0.1:1"},
			code:   1,
			stderr: "Error: is the gateway running with its admin API on http://127.0.0.1:1? dial tcp 127.0.0.1:1: connect: connection refused\n",
		},
	} {
		got := execute(t, "", tc.args...)
		want := result{stdout: tc.stdout, stderr: tc.stderr, code: tc.code}
		if diff := cmp.Diff(want, got, cmp.AllowUnexported(result{})); diff != "" {
			t.Errorf("hookgate %s (-want +got):\n%s", strings.Join(tc.args, " "), diff)
		}
		if diff := cmp.Diff(tc.sent, admin.requests()); diff != "" {
			t.Errorf("hookgate %s sent (-want +got):\n%s", strings.Join(tc.args, " "), diff)
		}
	}
}
