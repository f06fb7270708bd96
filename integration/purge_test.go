package integration

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// TestPurgeThroughTheBinary: hookgate dlq purge --dry-run removes
// nothing, a purge with no filter removes nothing without --all, and one
// with --limit removes that many, through the built binary and the admin
// API, on both stores.
func TestPurgeThroughTheBinary(t *testing.T) {
	backends(t, func(t *testing.T, global string) {
		g := deadLetterGateway(t, global, "a-1", "a-2", "a-3", "a-4", "a-5")
		total := func() int {
			t.Helper()
			out, err := cli(t, g, "dlq", "summary", "--format", "json")
			if err != nil {
				t.Fatalf("dlq summary: %v\n%s", err, out)
			}
			var v struct{ Total int }
			if err := json.Unmarshal([]byte(out), &v); err != nil {
				t.Fatalf("dlq summary: %v\n%s", err, out)
			}
			return v.Total
		}
		for _, tc := range []struct {
			args []string
			out  string // what it prints, or the start of its error
			fail bool
			left int
		}{
			{[]string{"dlq", "purge", "--dry-run", "--id", "a-3"}, "dry run: 1 dead letter matches; nothing removed\n", false, 5},
			{[]string{"dlq", "purge", "--dry-run", "--all"}, "dry run: 5 dead letters match; nothing removed\n", false, 5},
			{[]string{"dlq", "purge"}, "Error: purge with no filter removes every dead letter", true, 5},
			{[]string{"dlq", "purge", "--destination", "a"}, "Error: purge needs --limit N", true, 5},
			{[]string{"dlq", "purge", "--destination", "a", "--limit", "6"}, "Error: bad limit: 6; want 1 to 5 (max_redrive) (400 bad_limit)", true, 5},
			{[]string{"dlq", "purge", "--id", "a-3", "--cursor", "x"}, "Error: dlq purge does not use --cursor", true, 5},
			{[]string{"dlq", "purge", "--destination", "a", "--limit", "2"}, "2 dead letters removed; 3 more match\n", false, 3},
			{[]string{"dlq", "purge", "--all", "--limit", "5"}, "3 dead letters removed\n", false, 0},
		} {
			out, err := cli(t, g, tc.args...)
			if (err != nil) != tc.fail || !strings.HasPrefix(out, tc.out) {
				t.Errorf("hookgate %s: %v, %q; want %q (failing: %v)", strings.Join(tc.args, " "), err, out, tc.out, tc.fail)
			}
			if n := total(); n != tc.left {
				t.Fatalf("after hookgate %s: %d dead letters; want %d", strings.Join(tc.args, " "), n, tc.left)
			}
		}
		// The admin API refuses a purge without a filter, with its reason.
		if st, _, body := post(t, g.Admin+"/hookgate/dlq/purge", nil, []byte(`{"limit":1}`)); st != 400 || !strings.Contains(string(body), `"reason":"filter_required"`) {
			t.Errorf("POST /hookgate/dlq/purge {\"limit\":1}: %d %s; want 400 filter_required", st, body)
		}
	})
}

// TestDotIDsAtEveryDoor: the delivery IDs "." and ".." are shown by the
// CLI (dlq show, deliveries show) and the console (the list's links, the
// detail pages), whose paths a client or server would otherwise resolve
// away.
func TestDotIDsAtEveryDoor(t *testing.T) {
	g := deadLetterGateway(t, "", ".", "..")
	for _, id := range []string{".", ".."} {
		for _, args := range [][]string{{"dlq", "show", id}, {"deliveries", "show", "a", id}} {
			out, err := cli(t, g, args...)
			var v struct{ ID, Destination string }
			if err != nil || json.Unmarshal([]byte(out), &v) != nil || v.ID != id || v.Destination != "a" {
				t.Errorf("hookgate %s: %v\n%s", strings.Join(args, " "), err, out)
			}
		}
	}
	console := newConsoleClient(t, g.URL+"/console")
	st, _, list := console.do(t, "GET", "/dead?destination=a", nil)
	if st != 200 {
		t.Fatalf("the console's list: %d", st)
	}
	for _, id := range []string{".", ".."} {
		link := fmt.Sprintf("/console/dead/%%20%s?destination=a", id)
		if !strings.Contains(list, `href="`+link+`"`) {
			t.Errorf("the console's list has no link %s:\n%s", link, list)
		}
		for _, page := range []string{"/dead/%20" + id + "?destination=a", "/deliveries/%20" + id + "?destination=a"} {
			st, _, body := console.do(t, "GET", page, nil)
			if st != http.StatusOK || !strings.Contains(body, "<title>Delivery "+id+" ") && !strings.Contains(body, "Delivery "+id+"<") {
				t.Errorf("the console's %s: %d\n%s", page, st, body)
			}
		}
	}
}

// deadLetterGateway runs a gateway with a console and a destination a
// (max_redrive 5) whose receiver answers 400, and waits until the events
// ids are its dead letters.
func deadLetterGateway(t *testing.T, global string, ids ...string) *gateway {
	t.Helper()
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) { w.WriteHeader(400) })
	g := startGateway(t, "handle_path /console/* {\n\t\twebhook_console\n\t}", gatewayOptions{Global: fmt.Sprintf(
		"hookgate {\n\t\t%s\n\t\tsender {\n\t\t\tattempts 1\n\t\t\tmax_redrive 5\n\t\t}\n\t\tdestination a {\n\t\t\turl %s\n\t\t\tsecret %s\n\t\t}\n\t}",
		storeOf(global), up.URL, devSecret)})
	for _, id := range ids {
		body := fmt.Sprintf(`{"id":%q,"payload":{"n":1}}`, id)
		if st, _, got := post(t, g.Admin+"/hookgate/destinations/a/enqueue", nil, []byte(body)); st != 202 {
			t.Fatalf("enqueue %s: %d %s", id, st, got)
		}
	}
	waitFor(t, fmt.Sprintf("%d dead letters", len(ids)), func() bool {
		out, _ := cli(t, g, "dlq", "summary", "--format", "json")
		return strings.Contains(out, fmt.Sprintf(`"total": %d`, len(ids)))
	})
	return g
}
