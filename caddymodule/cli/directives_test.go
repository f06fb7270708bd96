package cli

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestMistypedDirective: run, adapt, validate and reload refuse a
// Caddyfile naming a webhook_ directive hookgate does not have, at its
// line and with the one meant, before Caddy's adapter (which names
// neither); a Caddyfile without one goes on to Caddy.
func TestMistypedDirective(t *testing.T) {
	dir := t.TempDir()
	typo := filepath.Join(dir, "typo.Caddyfile")
	if err := os.WriteFile(typo, []byte(":0 {\n\thandle /hooks {\n\t\twebhook_verfy {\n\t\t\tsecret whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\n\t\t}\n\t\trespond 200\n\t}\n}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	unknown := filepath.Join(dir, "Caddyfile")
	if err := os.WriteFile(unknown, []byte(":0 {\n\twebhook_frobnicate\n}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	good := filepath.Join(dir, "good.caddyfile")
	if err := os.WriteFile(good, []byte(":0 {\n\twebhook_health\n\trespond 200\n}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args   []string
		code   int
		stderr string
	}{
		{[]string{"adapt", "--config", typo}, 1, "Error: " + typo + ":3: unknown directive \"webhook_verfy\"; did you mean \"webhook_verify\"?\n"},
		{[]string{"validate", "--config", typo}, 1, "Error: " + typo + ":3: unknown directive \"webhook_verfy\"; did you mean \"webhook_verify\"?\n"},
		{[]string{"run", "--config", typo}, 1, "Error: " + typo + ":3: unknown directive \"webhook_verfy\"; did you mean \"webhook_verify\"?\n"},
		{[]string{"reload", "--config", typo, "--address", "127.0.0.1:1"}, 1, "Error: " + typo + ":3: unknown directive \"webhook_verfy\"; did you mean \"webhook_verify\"?\n"},
		{[]string{"adapt", "--config", unknown}, 1, "Error: " + unknown + ":2: unknown directive \"webhook_frobnicate\"; hookgate's are webhook_console, webhook_dedupe, webhook_enqueue, webhook_freshness, webhook_health, webhook_verify\n"},
		{[]string{"adapt", "--config", good}, 0, ""},
	} {
		cmd := exec.Command(os.Args[0], tc.args...)
		cmd.Env = append(os.Environ(), mainEnv+"=1")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		code := 0
		if ee, ok := errors.AsType[*exec.ExitError](err); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("%q: %v", tc.args, err)
		}
		got := stderr.String()
		if tc.code == 0 {
			got = "" // Caddy logs what it adapted
		}
		if code != tc.code || got != tc.stderr {
			t.Errorf("hookgate %s: exit %d, stderr %q; want %d, %q", strings.Join(tc.args, " "), code, stderr.String(), tc.code, tc.stderr)
		}
	}
}
