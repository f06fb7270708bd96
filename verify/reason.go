package verify

import (
	"errors"

	"github.com/hookgate/hookgate/internal/problem"
)

// Rejection is how a request Verify refused with err is answered: the
// reason, and the error whose text is the answer's detail. A missing or
// malformed header and a timestamp out of tolerance are told as they are;
// any other failure is told as ErrBadSignature alone, so that the answer
// gives a forger nothing to go on.
func Rejection(err error) (problem.Reason, error) {
	switch {
	case errors.Is(err, ErrMissingHeader):
		return problem.MissingHeader, err
	case errors.Is(err, ErrMalformedHeader):
		return problem.MalformedHeader, err
	case errors.Is(err, ErrTimestampOutOfTolerance):
		return problem.TimestampOutOfTolerance, err
	case errors.Is(err, ErrMalformedBody):
		return problem.MalformedBody, err
	case errors.Is(err, ErrKeyUnavailable):
		return problem.KeyUnavailable, err
	case errors.Is(err, ErrTopicNotAllowed):
		return problem.TopicNotAllowed, err
	case errors.Is(err, ErrCertURLNotAllowed):
		return problem.CertURLNotAllowed, err
	case errors.Is(err, ErrNotConfirmed):
		return problem.SubscriptionNotConfirmed, err
	case errors.Is(err, ErrStoreUnavailable):
		return problem.StoreUnavailable, err
	}
	return problem.BadSignature, ErrBadSignature
}
