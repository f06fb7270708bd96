package integration

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/hookgate/hookgate/internal/pgtest"
)

// TestReconcileCommand runs `hookgate reconcile` on a job declared in a
// Caddyfile, against a real PostgreSQL: exit 1 with the drift reported,
// 0 once it is fixed, 2 (and nothing on stdout) on an error.
func TestReconcileCommand(t *testing.T) {
	srv := pgtest.Start(t)
	conn, err := pgx.Connect(t.Context(), srv.DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	for _, sql := range []string{
		`CREATE TABLE reservations (id text, status text, version bigint, updated_at timestamptz)`,
		`CREATE TABLE enrollments (reservation_id text, state text, version bigint, updated_at timestamptz)`,
		`INSERT INTO reservations VALUES
			('r-1', 'confirmed', 3, now() - interval '1 hour'),
			('r-2', 'confirmed', 1, now() - interval '1 hour'),
			('r-3', 'expired', 2, now() - interval '1 hour'),
			('r-4', 'confirmed', 1, now() - interval '1 hour')`,
		`INSERT INTO enrollments VALUES
			('r-1', 'active', 3, now() - interval '1 hour'),
			('r-3', 'active', 1, now() - interval '1 hour'),
			('r-4', 'cancelled', 1, now() - interval '1 hour'),
			('r-9', 'active', 1, now() - interval '1 hour')`,
	} {
		if _, err := conn.Exec(t.Context(), sql); err != nil {
			t.Fatal(err)
		}
	}
	caddyfile := `{
	hookgate {
		reconcile enrollments {
			truth    postgres {env.TRUTH_DSN} "SELECT id, status, version, updated_at FROM reservations"
			receiver postgres {env.TRUTH_DSN} "SELECT reservation_id, state, version, updated_at FROM enrollments"
			expect   confirmed active
			expect   expired   none
			grace    2m
		}
	}
}
`
	path := filepath.Join(t.TempDir(), "Caddyfile")
	os.WriteFile(path, []byte(caddyfile), 0o600)
	run := func(args ...string) (int, string, string) {
		cmd := exec.Command(binary, append([]string{"reconcile", "--config", path}, args...)...)
		cmd.Env = append(os.Environ(), "TRUTH_DSN="+srv.DSN())
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		var exit *exec.ExitError
		code := 0
		if errors.As(err, &exit) {
			code = exit.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return code, stdout.String(), stderr.String()
	}

	code, out, errOut := run("--job", "enrollments", "--format", "json")
	if code != 1 {
		t.Fatalf("with drift: exit %d, want 1\n%s%s", code, out, errOut)
	}
	var r struct {
		Job      string
		Compared struct{ Truth, Receiver int }
		Drift    map[string]int
		Samples  []struct {
			Key, Kind                 string
			TruthState, ReceiverState *string `json:"-"`
		}
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("the report is not JSON: %v\n%s", err, out)
	}
	// r-2 missing; r-3 held although expired; r-4 in another state; r-9 orphaned.
	if r.Job != "enrollments" || r.Compared.Truth != 4 || r.Compared.Receiver != 4 ||
		r.Drift["missing"] != 1 || r.Drift["mismatched"] != 2 || r.Drift["orphaned"] != 1 || len(r.Samples) != 4 {
		t.Fatalf("report = %+v\n%s", r, out)
	}
	if !strings.Contains(out, `"truth_state": null`) || !strings.Contains(out, `"receiver_state": null`) {
		t.Errorf("an absent state is not null in:\n%s", out)
	}
	if code, out, _ := run("--job", "enrollments"); code != 1 || !strings.Contains(out, "drift: 1 missing, 2 mismatched, 1 orphaned") {
		t.Errorf("table report: exit %d\n%s", code, out)
	}

	for _, sql := range []string{
		`INSERT INTO enrollments VALUES ('r-2', 'active', 1, now() - interval '1 hour')`,
		`DELETE FROM enrollments WHERE reservation_id IN ('r-3', 'r-9')`,
		`UPDATE enrollments SET state = 'active' WHERE reservation_id = 'r-4'`,
	} {
		if _, err := conn.Exec(t.Context(), sql); err != nil {
			t.Fatal(err)
		}
	}
	if code, out, errOut := run("--job", "enrollments"); code != 0 || !strings.Contains(out, "drift: 0 missing, 0 mismatched, 0 orphaned") {
		t.Errorf("after the fix: exit %d\n%s%s", code, out, errOut)
	}

	if code, out, errOut := run("--job", "nope"); code != 2 || out != "" || !strings.Contains(errOut, `no reconcile job "nope"`) {
		t.Errorf("an unknown job: exit %d, stdout %q, stderr %s", code, out, errOut)
	}
	cmd := exec.Command(binary, "reconcile", "--config", path, "--job", "enrollments")
	cmd.Env = append(os.Environ(), "TRUTH_DSN=postgres://postgres@127.0.0.1:1/postgres")
	if out, err := cmd.Output(); err == nil || len(out) != 0 {
		t.Errorf("an unreachable database: %v, stdout %q; want exit 2 and nothing printed", err, out)
	} else if exit := new(exec.ExitError); errors.As(err, &exit) && exit.ExitCode() != 2 {
		t.Errorf("an unreachable database: exit %d, want 2", exit.ExitCode())
	}
}
