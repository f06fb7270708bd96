// Package sender delivers outbound webhooks from a durable queue: an
// envelope per event, enqueued once by delivery ID, leased by workers in
// batches, delivered signed, retried with capped exponential backoff and
// full jitter on transient failures, dead-lettered on permanent ones or
// when its attempts run out, and redriven by an operator. The Queue
// interface is what it needs of a store; see the redisqueue and boltqueue
// packages. It imports no Caddy.
package sender

import (
	"encoding/binary"
	"errors"
	"time"
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

// An envelope's stored form is compact binary, written once per state
// change and read once per lease:
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

// MarshalEnvelope encodes e for a store.
func MarshalEnvelope(e *Envelope) []byte {
	n := 64 + len(e.ID) + len(e.Destination) + len(e.EventType) + len(e.Entity) + len(e.LastError) +
		len(e.RedriveID) + len(e.TraceParent) + len(e.TraceState) + len(e.Payload)
	for _, a := range e.Log {
		n += 24 + len(a.Error) + len(a.RedriveID)
	}
	b := make([]byte, 0, n)
	b = append(b, envelopeVersion)
	for _, s := range []string{e.ID, e.Destination, e.EventType, e.Entity} {
		b = appendString(b, s)
	}
	for _, t := range []time.Time{e.EventTime, e.CreatedAt, e.NextAt, e.DeadAt} {
		b = binary.AppendVarint(b, unixMs(t))
	}
	b = binary.AppendUvarint(b, uint64(e.Attempts))
	b = binary.AppendUvarint(b, uint64(e.LastStatus))
	b = binary.AppendUvarint(b, uint64(e.Class))
	for _, s := range []string{e.LastError, e.RedriveID, e.TraceParent, e.TraceState} {
		b = appendString(b, s)
	}
	b = binary.AppendUvarint(b, uint64(len(e.Log)))
	for _, a := range e.Log {
		b = binary.AppendVarint(b, unixMs(a.At))
		b = binary.AppendUvarint(b, uint64(a.Status))
		b = appendString(b, a.Error)
		b = binary.AppendUvarint(b, uint64(a.Latency.Microseconds()))
		b = appendString(b, a.RedriveID)
	}
	return append(b, e.Payload...)
}

// UnmarshalEnvelope decodes what MarshalEnvelope encoded.
func UnmarshalEnvelope(b []byte) (*Envelope, error) {
	if len(b) < 1 || b[0] != envelopeVersion {
		return nil, errBadEnvelope
	}
	d := decoder{b: b[1:]}
	e := new(Envelope)
	for _, s := range []*string{&e.ID, &e.Destination, &e.EventType, &e.Entity} {
		*s = d.string()
	}
	for _, t := range []*time.Time{&e.EventTime, &e.CreatedAt, &e.NextAt, &e.DeadAt} {
		*t = fromUnixMs(d.varint())
	}
	e.Attempts = int(d.uvarint())
	e.LastStatus = int(d.uvarint())
	e.Class = Class(d.uvarint())
	for _, s := range []*string{&e.LastError, &e.RedriveID, &e.TraceParent, &e.TraceState} {
		*s = d.string()
	}
	n := d.uvarint()
	if n > uint64(len(d.b)) { // each attempt takes at least a byte
		return nil, errBadEnvelope
	}
	for range n {
		var a Attempt
		a.At = fromUnixMs(d.varint())
		a.Status = int(d.uvarint())
		a.Error = d.string()
		a.Latency = time.Duration(d.uvarint()) * time.Microsecond
		a.RedriveID = d.string()
		e.Log = append(e.Log, a)
	}
	if d.err {
		return nil, errBadEnvelope
	}
	e.Payload = append([]byte(nil), d.b...)
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

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// decoder reads the stored form; a read past the end sets err.
type decoder struct {
	b   []byte
	err bool
}

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = true
		d.b = nil
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.err = true
		d.b = nil
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) string() string {
	n := d.uvarint()
	if n > uint64(len(d.b)) {
		d.err = true
		d.b = nil
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

// Redriven prepares a dead letter for a redrive at now: it is due at once
// under the redrive ID, with its attempt budget renewed; its log is kept.
func Redriven(e *Envelope, redriveID string, now time.Time) {
	e.RedriveID = redriveID
	e.Attempts = 0
	e.NextAt = now
	e.DeadAt = time.Time{}
}
