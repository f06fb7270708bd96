package outage

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// TestLog: a failure every 0.7s for 100s is logged at once, then once a
// minute with the count since and how long the store has been down, then
// its end once, with the request's fields on each failure's line.
func TestLog(t *testing.T) {
	now := time.Date(2026, 1, 31, 12, 0, 0, 0, time.UTC)
	core, logs := observer.New(zap.InfoLevel)
	l := NewLog(zap.New(core), "dedupe", func() time.Time { return now })
	l.Answered() // no run on: nothing to log
	for range 143 {
		l.Failed(errors.New("connection refused"), zap.String("key", "k"))
		now = now.Add(700 * time.Millisecond)
	}
	l.Answered()
	l.Answered()

	type line struct {
		Msg                         string
		Key, Failures, DownFor, Err any
	}
	var got []line
	for _, e := range logs.All() {
		m := e.ContextMap()
		got = append(got, line{e.Message, m["key"], m["failures"], m["down_for"], m["error"]})
	}
	want := []line{
		{Msg: "dedupe store failed; until it answers, further failures are logged once a minute with their count", Key: "k", Err: "connection refused"},
		{"dedupe store still failing", "k", int64(86), "1m0s", "connection refused"},
		{Msg: "dedupe store answers again", Failures: int64(56), DownFor: "1m40s"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("log lines (-want +got):\n%s", diff)
	}
}
