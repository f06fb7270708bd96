package cli

import (
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	caddycmd "github.com/caddyserver/caddy/v2/cmd"
)

// anyAdmin is an admin API that answers every request 200 with answer
// and records what it was sent ("METHOD path?query body").
type anyAdmin struct {
	*httptest.Server
	mu   sync.Mutex
	sent []string
}

func newAnyAdmin(t *testing.T, answer string) *anyAdmin {
	t.Helper()
	a := &anyAdmin{}
	a.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		a.mu.Lock()
		a.sent = append(a.sent, strings.TrimSpace(r.Method+" "+r.URL.RequestURI()+" "+string(body)))
		a.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, answer)
	}))
	t.Cleanup(a.Close)
	return a
}

func (a *anyAdmin) requests() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	sent := a.sent
	a.sent = nil
	return sent
}

// flagValues are a value of each flag of the admin commands, for
// TestNoFlagIsIgnored; a bool flag has "".
var flagValues = map[string]string{
	"destination": "d9", "class": "gone", "since": "2026-01-01T00:00:00Z", "until": "2026-01-02T00:00:00Z",
	"id": "x9", "limit": "7", "cursor": "c9", "dry-run": "", "all": "", "status": "rd_9", "format": "json",
	"event-type": "t9", "entity": "e9", "state": "dead", "tenant": "t9",
	"url": "https://u9.example/", "scheme": "stripe", "secret": "whsec_OTk5", "secret-file": "/dev/null", "events": "seat.*", "header": "X-Nine: 9",
	"workers": "9", "rate": "9", "description": "nine", "metadata": "k=9", "envelopes": "purge", "expire-previous-after": "9h",
}

// jsonOnly are the subcommands that print JSON only: --format json is
// what they do anyway, so --format table is the value that must not be
// ignored.
var jsonOnlyBases = map[string]bool{"dlq show x": true, "dlq redrive --status rd_1": true,
	"deliveries show d x": true, "deliveries export": true, "deliveries resend --status rd_1": true}

// TestNoFlagIsIgnored: for every subcommand of dlq, deliveries and
// destinations, each of the command's flags either changes what it sends
// or prints, or is refused naming the flag, and then nothing is sent: a
// flag is never accepted and ignored.
func TestNoFlagIsIgnored(t *testing.T) {
	t.Setenv("USER", "tester")
	admin := newAnyAdmin(t, `{"entries":[],"groups":[],"destinations":[],"next_cursor":"","matched":3,"removed":2}`)
	addr := "--address=" + strings.TrimPrefix(admin.URL, "http://")
	for _, base := range [][]string{
		{"dlq", "summary"},
		{"dlq", "list"},
		{"dlq", "show", "x"},
		{"dlq", "redrive", "--limit", "5"},
		{"dlq", "redrive", "--status", "rd_1"},
		{"dlq", "purge", "--destination", "d", "--limit", "5"},
		{"dlq", "purge", "--all", "--limit", "5"},
		{"deliveries", "list"},
		{"deliveries", "show", "d", "x"},
		{"deliveries", "export"},
		{"deliveries", "resend", "--limit", "5"},
		{"deliveries", "resend", "--status", "rd_1"},
		{"destinations", "list"},
		{"destinations", "pause", "d"},
		{"destinations", "resume", "d"},
		{"destinations", "move", "o", "d"},
		{"destinations", "purge", "o"},
		{"destinations", "create", "d", "--url", "https://x.example/"},
		{"destinations", "update", "d", "--description", "x"},
		{"destinations", "rotate", "d"},
		{"destinations", "delete", "d"},
	} {
		want := execute(t, "", append(base, addr)...)
		wantSent := admin.requests()
		if want.code != 0 || len(wantSent) == 0 {
			t.Fatalf("hookgate %s: %+v, sent %q", strings.Join(base, " "), want, wantSent)
		}
		for _, name := range commandFlags(t, base[0]) {
			if name == "address" || slices.Contains(base, "--"+name) {
				continue
			}
			value, ok := flagValues[name]
			if !ok {
				t.Fatalf("flag --%s of %s has no value in flagValues", name, base[0])
			}
			if name == "format" && jsonOnlyBases[strings.Join(base, " ")] {
				value = "table"
			}
			flag := "--" + name
			if value != "" {
				flag += "=" + value
			}
			args := append(slices.Clone(base), flag, addr)
			got := execute(t, "", args...)
			sent := admin.requests()
			switch {
			case got.code == 1 && strings.Contains(got.stderr, "--"+name) && len(sent) == 0:
				// refused, naming it, before anything was sent
			case got.code == 1:
				t.Errorf("hookgate %s: exit 1, %q, sent %q; a refusal names the flag and sends nothing", strings.Join(args, " "), got.stderr, sent)
			case cmp.Equal(sent, wantSent) && got.stdout == want.stdout:
				t.Errorf("hookgate %s: sent and printed what it does without %s: the flag is ignored", strings.Join(args, " "), flag)
			}
		}
	}
}

// commandFlags are the flags the registered command name has.
func commandFlags(t *testing.T, name string) []string {
	t.Helper()
	c, ok := caddycmd.Commands()[name]
	if !ok {
		t.Fatalf("no command %q", name)
	}
	cmd := &cobra.Command{Use: name}
	c.CobraFunc(cmd)
	var out []string
	cmd.Flags().VisitAll(func(f *pflag.Flag) { out = append(out, f.Name) })
	return out
}

// TestPurgeCommand: purge refuses an empty filter without --all, a
// filter with --all and a batch without --limit (unless --id names the
// letters), before anything is sent; a dry run sends dry_run and says
// nothing was removed; a bounded purge says how many more match.
func TestPurgeCommand(t *testing.T) {
	t.Setenv("USER", "tester")
	admin := newAnyAdmin(t, `{"matched":5,"removed":2}`)
	addr := "--address=" + strings.TrimPrefix(admin.URL, "http://")
	for _, tc := range []struct {
		args   []string
		sent   []string
		stdout string
		stderr string
	}{
		{
			args:   []string{"dlq", "purge"},
			stderr: "Error: purge with no filter removes every dead letter: say --all, or filter with --destination, --class, --since, --until or --id (filter_required)\n",
		},
		{
			args:   []string{"dlq", "purge", "--dry-run", "--id", "bad_3", "--cursor", "c"},
			stderr: "Error: dlq purge does not use --cursor: it takes --destination, --tenant, --class, --since, --until, --id, --limit, --dry-run, --all, --format and --address\n",
		},
		{
			args:   []string{"dlq", "purge", "--destination", "d", "--all", "--limit", "1"},
			stderr: "Error: --all is every dead letter, and --destination filters: drop one or the other (bad_request)\n",
		},
		{
			args:   []string{"dlq", "purge", "--all"},
			stderr: "Error: purge needs --limit N, N at least 1, unless --id names the letters: remove a bounded batch, the oldest first (bad_limit)\n",
		},
		{
			args:   []string{"dlq", "purge", "--dry-run", "--id", "bad_3"},
			sent:   []string{`POST /hookgate/dlq/purge {"destination":"","class":"","since":"","until":"","ids":["bad_3"],"limit":0,"dry_run":true,"by":"cli: tester","all":false}`},
			stdout: "dry run: 5 dead letters match; nothing removed\n",
		},
		{
			args:   []string{"dlq", "purge", "--all", "--dry-run"},
			sent:   []string{`POST /hookgate/dlq/purge {"destination":"","class":"","since":"","until":"","ids":[],"limit":0,"dry_run":true,"by":"cli: tester","all":true}`},
			stdout: "dry run: 5 dead letters match; nothing removed\n",
		},
		{
			args:   []string{"dlq", "purge", "--class", "gone", "--limit", "2"},
			sent:   []string{`POST /hookgate/dlq/purge {"destination":"","class":"gone","since":"","until":"","ids":[],"limit":2,"dry_run":false,"by":"cli: tester","all":false}`},
			stdout: "2 dead letters removed; 3 more match\n",
		},
	} {
		got := execute(t, "", append(tc.args, addr)...)
		code := 0
		if tc.stderr != "" {
			code = 1
		}
		if diff := cmp.Diff(result{stdout: tc.stdout, stderr: tc.stderr, code: code}, got, cmp.AllowUnexported(result{})); diff != "" {
			t.Errorf("hookgate %s (-want +got):\n%s", strings.Join(tc.args, " "), diff)
		}
		if diff := cmp.Diff(tc.sent, admin.requests()); diff != "" {
			t.Errorf("hookgate %s sent (-want +got):\n%s", strings.Join(tc.args, " "), diff)
		}
	}
}

// TestDotIDs: the delivery IDs "." and ".." reach the admin API as
// segments no client or server resolves away.
func TestDotIDs(t *testing.T) {
	admin := newAnyAdmin(t, `{}`)
	addr := "--address=" + strings.TrimPrefix(admin.URL, "http://")
	for _, tc := range []struct {
		args []string
		sent string
	}{
		{[]string{"dlq", "show", ".."}, "GET /hookgate/dlq/%20..?"},
		{[]string{"dlq", "show", ".", "--destination", "d"}, "GET /hookgate/dlq/%20.?destination=d"},
		{[]string{"deliveries", "show", "d", ".."}, "GET /hookgate/deliveries/d/%20.."},
		{[]string{"destinations", "pause", ".."}, "POST /hookgate/destinations/%20../pause"},
	} {
		if got := execute(t, "", append(tc.args, addr)...); got.code != 0 {
			t.Errorf("hookgate %s: %+v", strings.Join(tc.args, " "), got)
		}
		if diff := cmp.Diff([]string{tc.sent}, admin.requests()); diff != "" {
			t.Errorf("hookgate %s sent (-want +got):\n%s", strings.Join(tc.args, " "), diff)
		}
	}
}
