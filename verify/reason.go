package verify

import (
	"errors"
	"fmt"

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
		// Its cause (a DNS or dial error) would tell anyone the
		// gateway's network: the caller logs it.
		return problem.KeyUnavailable, errKeyUnavailableDetail
	case errors.Is(err, ErrTopicNotAllowed):
		return problem.TopicNotAllowed, err
	case errors.Is(err, ErrCertURLNotAllowed):
		return problem.CertURLNotAllowed, err
	case errors.Is(err, ErrNotConfirmed):
		return problem.SubscriptionNotConfirmed, errNotConfirmedDetail
	case errors.Is(err, ErrStoreUnavailable):
		return problem.StoreUnavailable, err
	}
	return problem.BadSignature, ErrBadSignature
}

// The details of the rejections whose causes stay in the logs.
var (
	errKeyUnavailableDetail = fmt.Errorf("%w: the provider's key could not be fetched; try again", ErrKeyUnavailable)
	errNotConfirmedDetail   = fmt.Errorf("%w: the SubscribeURL did not answer 200", ErrNotConfirmed)
)
