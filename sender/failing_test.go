package sender

import (
	"testing"
	"time"
)

// TestFailingSince: a destination's failing run, as one instance judges
// it from its own report and the board: it starts at the latest success
// any instance reported, or at the earliest failure since; a success
// reported long ago (a stale report of an instance restarted since) does
// not hold it back, nor does an instance forgotten; an enable, a success
// on the board, starts it afresh on every instance.
func TestFailingSince(t *testing.T) {
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	s := newSharedStore(nil, time.Second, time.Second, func() time.Time { return now })
	s.add("d", nil)
	ago := func(d time.Duration) time.Time { return now.Add(-d) }
	for _, tc := range []struct {
		name    string
		own     Report
		others  map[string]Report
		want    time.Time
		failing bool
	}{
		{"its latest attempt succeeded", Report{OK: ago(time.Minute)}, nil, time.Time{}, false},
		{"alone", Report{OK: ago(20 * time.Hour), Failing: ago(10 * time.Hour)}, nil, ago(10 * time.Hour), true},
		{"another's stale success does not hold it", Report{Failing: ago(10 * time.Hour)},
			map[string]Report{"old": {OK: ago(23 * time.Hour), At: ago(23 * time.Hour)}}, ago(10 * time.Hour), true},
		{"another failed first", Report{Failing: ago(time.Hour)},
			map[string]Report{"b": {Failing: ago(3 * time.Hour), At: ago(time.Minute)}}, ago(3 * time.Hour), true},
		{"another succeeded since: the run starts there", Report{Failing: ago(10 * time.Hour)},
			map[string]Report{"b": {OK: ago(time.Minute), At: ago(time.Minute)}}, ago(time.Minute), true},
		{"an enable elsewhere starts it afresh", Report{Failing: ago(6 * 24 * time.Hour)},
			map[string]Report{"enabler": {OK: ago(2 * time.Second), At: ago(2 * time.Second)}}, ago(2 * time.Second), true},
		{"a forgotten report counts for nothing", Report{Failing: ago(10 * time.Hour)},
			map[string]Report{"gone": {OK: ago(time.Hour), Failing: ago(30 * time.Hour), At: ago(25 * time.Hour)}}, ago(10 * time.Hour), true},
	} {
		s.mu.Lock()
		e := s.entries["d"]
		e.report = tc.own
		e.board = Board{Reports: map[string]Report{}}
		for id, r := range tc.others {
			e.board.Reports[id] = r
		}
		s.mu.Unlock()
		got, ok := s.failingSince("d")
		if ok != tc.failing || !got.Equal(tc.want) {
			t.Errorf("%s: failingSince = %s, %v; want %s, %v", tc.name, got, ok, tc.want, tc.failing)
		}
	}
}
