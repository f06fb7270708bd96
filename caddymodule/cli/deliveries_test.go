package cli

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestDeliveriesCommands runs hookgate deliveries against an admin API:
// what each sends, prints, and exits with.
func TestDeliveriesCommands(t *testing.T) {
	t.Setenv("USER", "tester")
	entry := func(id string) string {
		return `{"id":"` + id + `","destination":"d1","event_type":"t","entity":"","state":"delivered","attempts":1,"created_at":"2024-01-02T03:04:00Z","settled_at":"2024-01-02T03:04:05Z","last_status":200}`
	}
	admin := newFakeAdmin(t, map[string]string{
		"GET /hookgate/deliveries?cursor=c1&destination=d1&entity=r-1&event_type=t&limit=5&state=delivered": `{"entries":[` + entry("e1") + `],"next_cursor":"c2"}`,
		"GET /hookgate/deliveries?id=e%2F1":                                `{"entries":[],"next_cursor":""}`,
		"GET /hookgate/deliveries/d1/e%2F1":                                `{"id":"e/1","payload_expired":true}`,
		"POST /hookgate/deliveries/resend":                                 `{"redrive_id":"r1","matched":5,"more":true,"moved":3}`,
		"GET /hookgate/deliveries?entity=quiet":                            `{"entries":[],"next_cursor":"c9"}`,
		"GET /hookgate/deliveries?entity=none":                             `{"entries":[],"next_cursor":""}`,
		"GET /hookgate/redrives/r1":                                        `{"redrive_id":"r1","moved":3}`,
		"GET /hookgate/deliveries?cursor=&limit=2&received=true&since=s":   `{"entries":[` + entry("e1") + `,` + entry("e2") + `],"next_cursor":"n1"}`,
		"GET /hookgate/deliveries?cursor=n1&limit=2&received=true&since=s": `{"entries":[` + entry("e3") + `],"next_cursor":""}`,
		"GET /hookgate/deliveries?cursor=&limit=1000&received=true":        `{"entries":[` + entry("e1") + `],"next_cursor":"bad"}`,
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
			args: []string{"deliveries", "list", "--destination", "d1", "--event-type", "t", "--entity", "r-1", "--state", "delivered", "--limit", "5", "--cursor", "c1", addr},
			sent: []string{"GET /hookgate/deliveries?cursor=c1&destination=d1&entity=r-1&event_type=t&limit=5&state=delivered"},
			stdout: "ID  DESTINATION  TYPE  ENTITY  STATE      STATUS  ATTEMPTS  SETTLED AT\n" +
				"e1  d1           t     -       delivered  200     1         2024-01-02T03:04:05Z\n" +
				"more: --cursor 'c2'\n",
		},
		{
			args:   []string{"deliveries", "list", "--id", "e/1", "--format", "json", addr},
			sent:   []string{"GET /hookgate/deliveries?id=e%2F1"},
			stdout: "{\n  \"entries\": [],\n  \"next_cursor\": \"\"\n}\n",
		},
		{
			// A page that found none yet is not "none": older ones may match.
			args:   []string{"deliveries", "list", "--entity", "quiet", addr},
			sent:   []string{"GET /hookgate/deliveries?entity=quiet"},
			stdout: "none of the newest entries looked at match; older ones may\nmore: --cursor 'c9'\n",
		},
		{
			args:   []string{"deliveries", "list", "--entity", "none", addr},
			sent:   []string{"GET /hookgate/deliveries?entity=none"},
			stdout: "no delivery matches\n",
		},
		{
			args:   []string{"deliveries", "show", "d1", "e/1", addr},
			sent:   []string{"GET /hookgate/deliveries/d1/e%2F1"},
			stdout: "{\n  \"id\": \"e/1\",\n  \"payload_expired\": true\n}\n",
		},
		{
			args:   []string{"deliveries", "resend", "--limit", "3", "--state", "delivered", "--since", "2024-01-01T00:00:00Z", "--id", "a", "--id", "b", addr},
			sent:   []string{`POST /hookgate/deliveries/resend {"destination":"","event_type":"","since":"2024-01-01T00:00:00Z","until":"","ids":["a","b"],"state":"delivered","limit":3,"dry_run":false,"by":"cli: tester"}`},
			stdout: "resend r1: at least 5 matched, 3 queued to be sent again\nwatch: hookgate deliveries resend --status r1\n",
		},
		{
			args:   []string{"deliveries", "resend", "--dry-run", "--destination", "d1", addr},
			sent:   []string{`POST /hookgate/deliveries/resend {"destination":"d1","event_type":"","since":"","until":"","ids":[],"state":"","limit":1,"dry_run":true,"by":"cli: tester"}`},
			stdout: "dry run: at least 5 deliveries match; nothing sent\n",
		},
		{
			args:   []string{"deliveries", "resend", "--status", "r1", addr},
			sent:   []string{"GET /hookgate/redrives/r1"},
			stdout: "{\n  \"redrive_id\": \"r1\",\n  \"moved\": 3\n}\n",
		},
		{
			args:   []string{"deliveries", "export", "--since", "s", "--limit", "2", addr},
			sent:   []string{"GET /hookgate/deliveries?cursor=&limit=2&received=true&since=s", "GET /hookgate/deliveries?cursor=n1&limit=2&received=true&since=s"},
			stdout: entry("e1") + "\n" + entry("e2") + "\n" + entry("e3") + "\n",
		},

		// Errors: exit 1, "Error: ..." once on the error output; an
		// export that fails part-way has written what it read.
		{
			args:   []string{"deliveries", "export", addr},
			sent:   []string{"GET /hookgate/deliveries?cursor=&limit=1000&received=true", "GET /hookgate/deliveries?cursor=bad&limit=1000&received=true"},
			stdout: entry("e1") + "\n",
			code:   1,
			stderr: "Error: no such thing (404 not_found)\n",
		},
		{args: []string{"deliveries", "resend", addr}, code: 1, stderr: "Error: resend needs --limit N, N at least 1: send a bounded batch, then watch it (bad_limit)\n"},
		{args: []string{"deliveries", "resend", "--limit", "1", "--entity", "r-1", addr}, code: 1, stderr: "Error: deliveries resend does not use --entity: it takes --destination, --tenant, --event-type, --id, --state, --since, --until, --limit, --dry-run, --format and --address\n"},
		{args: []string{"deliveries", "show", "e1", addr}, code: 1, stderr: "Error: show needs a destination and a delivery ID\n"},
		{args: []string{"deliveries", "list", "x", addr}, code: 1, stderr: "Error: deliveries list takes no argument: filter with flags\n"},
		{args: []string{"deliveries", "list", "--id", "a", "--id", "b", addr}, code: 1, stderr: "Error: --id: list and export look up one delivery ID\n"},
		{args: []string{"deliveries", "bogus", addr}, code: 1, stderr: "Error: unknown deliveries command \"bogus\": want list, show, resend or export\n"},
		{args: []string{"deliveries", "list", "--format", "yaml", addr}, code: 1, stderr: "Error: --format \"yaml\": want table or json\n"},
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
