package verify

import (
	"errors"
	"fmt"
	"testing"

	"github.com/hookgate/hookgate/internal/problem"
)

// TestRejection: each failure of Verify is answered with its reason; one
// that is none of the named ones is a bad signature, its detail withheld.
func TestRejection(t *testing.T) {
	for _, tt := range []struct {
		err     error
		reason  problem.Reason
		wantErr error
	}{
		{fmt.Errorf("%w: webhook-id", ErrMissingHeader), problem.MissingHeader, nil},
		{fmt.Errorf("%w: two webhook-id", ErrMalformedHeader), problem.MalformedHeader, nil},
		{fmt.Errorf("%w: 301s old", ErrTimestampOutOfTolerance), problem.TimestampOutOfTolerance, nil},
		{fmt.Errorf("%w: no secret matches", ErrBadSignature), problem.BadSignature, ErrBadSignature},
		{errors.New("secret 2 is not base64"), problem.BadSignature, ErrBadSignature},
	} {
		reason, err := Rejection(tt.err)
		want := tt.wantErr
		if want == nil {
			want = tt.err
		}
		if reason != tt.reason || err != want {
			t.Errorf("Rejection(%v) = %v, %v; want %v, %v", tt.err, reason.Code, err, tt.reason.Code, want)
		}
	}
}
