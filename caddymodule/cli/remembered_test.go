package cli

import (
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hookgate/hookgate/dedupe"
	"github.com/hookgate/hookgate/dedupe/boltstore"
	dedupeapi "github.com/hookgate/hookgate/dedupe/httpapi"
	"github.com/hookgate/hookgate/internal/boltfile"
	"github.com/hookgate/hookgate/internal/bolttest"
	"github.com/hookgate/hookgate/internal/route"
)

// TestDedupeDotKeys: the keys "." and ".." are shown and forgotten
// through the admin API, mounted as Caddy's admin mounts it (a ServeMux,
// which cleans a path's "." and ".." segments away).
func TestDedupeDotKeys(t *testing.T) {
	db := bolttest.Open(t, boltfile.Options(time.Second, false))
	s, err := boltstore.New(db, boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	now := time.Now()
	for _, key := range []string{".", ".."} {
		if _, err := s.Claim(t.Context(), key, dedupe.Claim{Token: "t", Lease: time.Minute, Retention: time.Hour, Now: now}); err != nil {
			t.Fatal(err)
		}
		if err := s.Record(t.Context(), key, "t", dedupe.Record{Status: 201 + len(key)}, time.Hour, now); err != nil {
			t.Fatal(err)
		}
	}
	var mux route.Mux
	(&dedupeapi.Handler{Store: s, Logger: slog.New(slog.DiscardHandler)}).Register(&mux)
	admin := httptest.NewServer(&mux)
	t.Cleanup(admin.Close)
	addr := "--address=" + strings.TrimPrefix(admin.URL, "http://")

	for _, key := range []string{".", ".."} {
		got := execute(t, "", "dedupe", "show", key, addr)
		if want := "recorded  " + map[string]string{".": "202", "..": "203"}[key]; got.code != 0 || !strings.Contains(got.stdout, want) {
			t.Errorf("dedupe show %s: %+v, want %q", key, got, want)
		}
		if got := execute(t, "", "dedupe", "forget", key, addr); got.code != 0 {
			t.Errorf("dedupe forget %s: %+v", key, got)
		}
		if e, err := s.Get(t.Context(), key, now); err != nil || e.State != dedupe.Absent {
			t.Errorf("%s after forget: %+v %v", key, e, err)
		}
	}
}
