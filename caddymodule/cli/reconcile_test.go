package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// rowsAPI serves rows as a reconcile HTTP source, in one page: each row
// is "key state".
func rowsAPI(t *testing.T, rows ...string) string {
	t.Helper()
	type item struct {
		Key       string `json:"key"`
		State     string `json:"state"`
		Version   int    `json:"version"`
		UpdatedAt string `json:"updated_at"`
	}
	items := []item{}
	for _, r := range rows {
		key, state, _ := strings.Cut(r, " ")
		items = append(items, item{key, state, 1, "2020-01-01T00:00:00Z"})
	}
	page, err := json.Marshal(map[string]any{"items": items})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write(page) }))
	t.Cleanup(srv.Close)
	return srv.URL
}

// reconcileConfig writes a Caddyfile with the admin API on admin and two
// jobs: drift (keys a, b confirmed; a active, c active) and same (no
// drift), both repairing to "enrollment".
func reconcileConfig(t *testing.T, admin string) string {
	t.Helper()
	truth := rowsAPI(t, "a confirmed", "b confirmed")
	receiver := rowsAPI(t, "a active", "c active")
	active := rowsAPI(t, "a active", "b active")
	path := filepath.Join(t.TempDir(), "Caddyfile")
	cfg := fmt.Sprintf(`{
	admin %[1]s
	hookgate {
		reconcile drift {
			truth    http %[2]s
			receiver http %[3]s
			expect   confirmed active
			repair {
				destination enrollment
			}
		}
		reconcile same {
			truth    http %[2]s
			receiver http %[4]s
			expect   confirmed active
		}
	}
}
`, admin, truth, receiver, active)
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// took is the report's run time, which varies.
var took = regexp.MustCompile(`[0-9]+\.[0-9]s\n|"duration_seconds":[0-9.e-]+`)

// TestReconcileCommand: exit 0 without drift, 1 with (the report on
// standard output), 2 on any error (a usage error too), then with nothing
// on standard output.
func TestReconcileCommand(t *testing.T) {
	var mu sync.Mutex
	var enqueued []string
	admin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var e struct{ ID string }
		if err := json.Unmarshal(body, &e); err != nil {
			t.Errorf("the enqueue's body is not JSON: %v: %s", err, body)
		}
		mu.Lock()
		enqueued = append(enqueued, r.Method+" "+r.URL.Path+" "+e.ID)
		mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
		_, _ = io.WriteString(w, "{}")
	}))
	defer admin.Close()
	config := reconcileConfig(t, strings.TrimPrefix(admin.URL, "http://"))

	for _, tc := range []struct {
		args   []string
		code   int
		stdout string
	}{
		{
			args: []string{"--job", "drift"},
			code: 1,
			stdout: "job drift: compared 2 truth rows, 2 receiver rows in …" +
				"drift: 1 missing, 0 mismatched, 1 orphaned; 0 repairs enqueued\n" +
				"KEY  KIND      TRUTH      RECEIVER\n" +
				"b    missing   confirmed  -\n" +
				"c    orphaned  -          active\n",
		},
		{
			args:   []string{"--job", "drift", "--format", "json"},
			code:   1,
			stdout: `{"job":"drift","compared":{"truth":2,"receiver":2},"drift":{"mismatched":0,"missing":1,"orphaned":1},"samples":[{"key":"b","kind":"missing","truth_state":"confirmed","receiver_state":null},{"key":"c","kind":"orphaned","truth_state":null,"receiver_state":"active"}],"repaired":0,"unrepairable":0,…}` + "\n",
		},
		{
			args:   []string{"--job", "same"},
			stdout: "job same: compared 2 truth rows, 2 receiver rows in …drift: 0 missing, 0 mismatched, 0 orphaned; 0 repairs enqueued\n",
		},
		{
			args: []string{"--job", "drift", "--repair"},
			code: 1,
			stdout: "job drift: compared 2 truth rows, 2 receiver rows in …" +
				"drift: 1 missing, 0 mismatched, 1 orphaned; 1 repairs enqueued\n" +
				"KEY  KIND      TRUTH      RECEIVER\n" +
				"b    missing   confirmed  -\n" +
				"c    orphaned  -          active\n",
		},
	} {
		got := execute(t, "", append([]string{"reconcile", "--config", config}, tc.args...)...)
		got.stdout = took.ReplaceAllString(got.stdout, "…")
		if got != (result{stdout: tc.stdout, code: tc.code}) {
			t.Errorf("reconcile %q: exit %d, stderr %q, stdout\n%s\nwant exit %d and\n%s", tc.args, got.code, got.stderr, got.stdout, tc.code, tc.stdout)
		}
	}
	mu.Lock()
	if want := []string{"POST /hookgate/destinations/enrollment/enqueue reconcile:b:confirmed:1"}; fmt.Sprint(enqueued) != fmt.Sprint(want) {
		t.Errorf("--repair enqueued %q through the config's admin API; want %q", enqueued, want)
	}
	mu.Unlock()

	for _, tc := range []struct {
		args   []string
		stderr string
	}{
		{[]string{"--job", "drift", "--nope"}, "Error: unknown flag: --nope (see hookgate reconcile --help)\n"},
		{[]string{"--job", "drift", "--limit", "many"}, "Error: invalid argument \"many\" for \"--limit\" flag: strconv.ParseInt: parsing \"many\": invalid syntax (see hookgate reconcile --help)\n"},
		{[]string{"--job", "drift", "--limit", "0", "--repair"}, "Error: --limit 0: want a positive integer\n"},
		{[]string{"--job", "drift", "--timeout", "0s"}, "Error: --timeout 0s: want a positive duration\n"},
		{[]string{"--job", "drift", "--format", "yaml"}, "Error: --format \"yaml\": want table or json\n"},
		{[]string{}, "Error: --config and --job are required\n"},
		{[]string{"drift"}, "Error: unexpected argument \"drift\": name the job with --job\n"},
		{[]string{"--job", "nope"}, "Error: no reconcile job \"nope\" in " + config + "\n"},
		{[]string{"--job", "same", "--repair"}, "Error: job same has no repair block\n"},
		{[]string{"--job", "drift", "--repair", "--address", "127.0.0.1:1"}, "Error: repairing \"b\": is the gateway running with its admin API on http://127.0.0.1:1? "},
	} {
		got := execute(t, "", append([]string{"reconcile", "--config", config}, tc.args...)...)
		if got.code != 2 || got.stdout != "" || !strings.HasPrefix(got.stderr, tc.stderr) || strings.Count(got.stderr, "Error:") != 1 {
			t.Errorf("reconcile %q: %+v; want exit 2, nothing on stdout, stderr %q", tc.args, got, tc.stderr)
		}
	}
}
