package dedupe

import (
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestRecordRoundTrip(t *testing.T) {
	for _, rec := range []Record{
		{Status: 200},
		{Status: 201, Header: http.Header{"Content-Type": {"application/json"}, "X-Multi": {"a", "", "c"}}, Body: []byte("{\"ok\":true}\x00\xff")},
		{Status: 422, Header: http.Header{}, BodyOmitted: true},
	} {
		got, err := UnmarshalRecord(MarshalRecord(rec))
		if err != nil {
			t.Fatal(err)
		}
		if rec.Header == nil {
			rec.Header = http.Header{}
		}
		if diff := cmp.Diff(&rec, got); diff != "" {
			t.Errorf("round trip (-want +got):\n%s", diff)
		}
	}
}

// FuzzUnmarshalRecord feeds corrupt stored records: decoding must fail
// cleanly, never panic, and whatever decodes must encode back the same.
func FuzzUnmarshalRecord(f *testing.F) {
	f.Add(MarshalRecord(Record{Status: 200, Header: http.Header{"A": {"b"}}, Body: []byte("x")}))
	f.Add([]byte{1, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Add([]byte{1, 1, 200, 1, 5, 'a'})
	f.Fuzz(func(t *testing.T, b []byte) {
		rec, err := UnmarshalRecord(b)
		if err != nil {
			return
		}
		again, err := UnmarshalRecord(MarshalRecord(*rec))
		if err != nil {
			t.Fatalf("re-decoding: %v", err)
		}
		if diff := cmp.Diff(rec, again); diff != "" {
			t.Fatalf("re-encoding changed the record:\n%s", diff)
		}
	})
}
