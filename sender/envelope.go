package sender

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/hookgate/hookgate/internal/wire"
)

// Envelope is one event on its way to one destination.
type Envelope struct {
	ID          string // the delivery ID, unique per destination
	Destination string
	EventType   string
	Entity      string
	EventTime   time.Time // zero when unknown
	CreatedAt   time.Time
	Payload     []byte // delivered byte for byte
	ContentType string // the payload's media type; "" means application/json

	// Attempts counts the deliveries made so far, the first included.
	Attempts int
	// NextAt is when the envelope is next due.
	NextAt time.Time
	// LastStatus, LastError and Class describe the last failed attempt.
	LastStatus int
	LastError  string
	Class      Class
	// RedriveID is set by a redrive; Log keeps every attempt, before and
	// after redrives.
	RedriveID string
	Log       []Attempt
	// TraceParent and TraceState are the W3C trace context of the enqueue.
	TraceParent string
	TraceState  string
	// DeadAt is when the envelope was dead-lettered (dead ones only).
	DeadAt time.Time
}

// Attempt is one delivery attempt.
type Attempt struct {
	At        time.Time
	Status    int // 0: no response
	Error     string
	Latency   time.Duration
	RedriveID string
}

// Before version 2 (record.go), a store kept an envelope as one binary
// blob, read in full by every scan. The queues still read it, to move
// what such a store holds to the current layout:
//
//	version byte | string id, destination, event type, entity |
//	varint event time, created, next, dead (unix ms, 0 for none) |
//	uvarint attempts, last status, class | string last error, redrive id,
//	trace parent, trace state | uvarint log length | per attempt: varint
//	at (unix ms), uvarint status, string error, uvarint latency µs,
//	string redrive id | payload (the rest)
//
// where a string is a uvarint length and its bytes.
const envelopeVersion = 1

var errBadEnvelope = errors.New("malformed stored envelope")

// MarshalEnvelope encodes e in the version 1 form (tests write such
// stores with it).
func MarshalEnvelope(e *Envelope) []byte {
	n := 64 + len(e.ID) + len(e.Destination) + len(e.EventType) + len(e.Entity) + len(e.LastError) +
		len(e.RedriveID) + len(e.TraceParent) + len(e.TraceState) + len(e.Payload)
	for _, a := range e.Log {
		n += 24 + len(a.Error) + len(a.RedriveID)
	}
	b := make([]byte, 0, n)
	b = append(b, envelopeVersion)
	for _, s := range []string{e.ID, e.Destination, e.EventType, e.Entity} {
		b = wire.AppendString(b, s)
	}
	for _, t := range []time.Time{e.EventTime, e.CreatedAt, e.NextAt, e.DeadAt} {
		b = binary.AppendVarint(b, unixMs(t))
	}
	b = binary.AppendUvarint(b, uint64(e.Attempts))
	b = binary.AppendUvarint(b, uint64(e.LastStatus))
	b = binary.AppendUvarint(b, uint64(e.Class))
	for _, s := range []string{e.LastError, e.RedriveID, e.TraceParent, e.TraceState} {
		b = wire.AppendString(b, s)
	}
	b = binary.AppendUvarint(b, uint64(len(e.Log)))
	for _, a := range e.Log {
		b = AppendAttempt(b, a)
	}
	return append(b, e.Payload...)
}

// UnmarshalEnvelope decodes the version 1 form.
func UnmarshalEnvelope(b []byte) (*Envelope, error) {
	if len(b) < 1 || b[0] != envelopeVersion {
		return nil, errBadEnvelope
	}
	d := wire.Decoder{Buf: b[1:]}
	e := new(Envelope)
	for _, s := range []*string{&e.ID, &e.Destination, &e.EventType, &e.Entity} {
		*s = d.LenString()
	}
	for _, t := range []*time.Time{&e.EventTime, &e.CreatedAt, &e.NextAt, &e.DeadAt} {
		*t = fromUnixMs(d.Varint())
	}
	e.Attempts = int(d.Uvarint())
	e.LastStatus = int(d.Uvarint())
	e.Class = Class(d.Uvarint())
	for _, s := range []*string{&e.LastError, &e.RedriveID, &e.TraceParent, &e.TraceState} {
		*s = d.LenString()
	}
	n := d.Uvarint()
	if n > uint64(len(d.Buf)) { // each attempt takes at least a byte
		return nil, errBadEnvelope
	}
	for range n {
		e.Log = append(e.Log, readAttempt(&d))
	}
	if d.Err {
		return nil, errBadEnvelope
	}
	e.Payload = append([]byte(nil), d.Buf...)
	return e, nil
}

func unixMs(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

func fromUnixMs(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}

// Redriven prepares a dead letter for a redrive at now: it is due at once
// under the redrive ID, with its attempt budget renewed; its log is kept.
func Redriven(e *Envelope, redriveID string, now time.Time) {
	e.RedriveID = redriveID
	e.Attempts = 0
	e.NextAt = now
	e.DeadAt = time.Time{}
}

// MaxIDLen is the longest delivery ID, in bytes.
const MaxIDLen = 1024

// ErrBadID means a delivery ID that is not 1 to MaxIDLen bytes of visible
// ASCII (0x21 to 0x7E).
var ErrBadID = errors.New("bad delivery ID")

// CheckID reports whether id can be a delivery ID: 1 to MaxIDLen bytes of
// visible ASCII, so that it goes into a request header, a log line and a
// store key unchanged. The error wraps ErrBadID and says what is wrong,
// without echoing the ID.
func CheckID(id string) error {
	switch {
	case id == "":
		return fmt.Errorf("%w: empty", ErrBadID)
	case len(id) > MaxIDLen:
		return fmt.Errorf("%w: %d bytes, over %d", ErrBadID, len(id), MaxIDLen)
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; c < 0x21 || c > 0x7e {
			return fmt.Errorf("%w: byte %d is 0x%02x; want visible ASCII (0x21 to 0x7e)", ErrBadID, i, c)
		}
	}
	return nil
}
