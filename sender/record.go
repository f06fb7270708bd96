package sender

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/hookgate/hookgate/internal/wire"
)

// A queue keeps each envelope in three parts, so that no scan reads what
// it does not need:
//
//   - the record (Meta): small, everything a list, a count, a summary, a
//     redrive or a purge reads, and what the delivery history keeps;
//   - the payload, byte for byte, read only to deliver it and to show one
//     envelope;
//   - the attempt log, written when an attempt settles, read with the
//     payload.

// Meta is an envelope's record: the envelope without its payload and its
// attempt log.
type Meta struct {
	ID          string // the store's key: not in the encoded record
	Destination string // the store's key: not in the encoded record
	EventType   string
	Entity      string
	ContentType string
	EventTime   time.Time
	CreatedAt   time.Time
	NextAt      time.Time
	// DeadAt is when it was dead-lettered; the dead index holds it, so it
	// is not in the encoded record (zero unless State is dead).
	DeadAt time.Time
	// Tried counts every attempt made, before and after redrives: the
	// attempt log's length.
	Tried      int
	LastStatus int
	LastError  string
	Class      Class
	RedriveID  string
	// TraceParent and TraceState are the W3C trace context of the enqueue.
	TraceParent string
	TraceState  string
	// Size is the payload's length; Fingerprint its first 8 bytes of
	// SHA-256 (the enqueue's idempotency check).
	Size        int
	Fingerprint [8]byte
	// ReceivedSize is the length of the Received block the stored payload
	// starts with (StoredPayload); 0 for none.
	ReceivedSize int
	// SettledAt is when a settled envelope was delivered, or died (not in
	// the encoded record: the history's index holds it).
	SettledAt time.Time
	// HistoryID is a history entry's position, "<settled ms>-<sequence>":
	// History starts after it when it is the cursor.
	HistoryID string
	// Behind is, for an envelope that waits behind its entity's head
	// (Ordering), the head's ID; Held is set when that head is a dead
	// letter that holds the entity. Pending sets them; neither is in the
	// encoded record.
	Behind string
	Held   bool
	// State is the envelope's state when read (not in the encoded record).
	// Metas answers an ID delivered within the history as StateDelivered.
	State State
	// Broken is set for a record that does not decode (a damaged entry,
	// or one written by a newer version): it is listed, with the reason
	// in LastError, so that it can be found and purged; it is never sent.
	Broken bool
}

// BrokenMeta is the record listed for an envelope whose stored record
// does not decode.
func BrokenMeta(dest, id string, err error) *Meta {
	return &Meta{ID: id, Destination: dest, Broken: true, LastError: "the stored record does not decode: " + err.Error()}
}

// MetaOf is e's record.
func MetaOf(e *Envelope) *Meta {
	return &Meta{
		ID: e.ID, Destination: e.Destination, EventType: e.EventType, Entity: e.Entity, ContentType: e.ContentType,
		EventTime: e.EventTime, CreatedAt: e.CreatedAt, NextAt: e.NextAt, DeadAt: e.DeadAt,
		Tried: len(e.Log), LastStatus: e.LastStatus, LastError: e.LastError, Class: e.Class, RedriveID: e.RedriveID,
		TraceParent: e.TraceParent, TraceState: e.TraceState, Size: len(e.Payload), Fingerprint: PayloadFingerprint(e.Payload),
		ReceivedSize: e.Received.size(),
	}
}

// Assemble is the envelope of a record, its stored payload (StoredPayload)
// and its attempt log. Its Attempts, the attempts of the current run, are
// the log's last entries made under the record's redrive ID. A stored
// payload no longer kept (empty) leaves Received nil.
func Assemble(m *Meta, payload []byte, log []Attempt) (*Envelope, error) {
	var received *Received
	if m.ReceivedSize > 0 && len(payload) > 0 {
		if len(payload) < m.ReceivedSize {
			return nil, errBadReceived
		}
		var err error
		if received, err = readReceived(payload[:m.ReceivedSize]); err != nil {
			return nil, err
		}
		payload = payload[m.ReceivedSize:]
	}
	e := &Envelope{
		ID: m.ID, Destination: m.Destination, EventType: m.EventType, Entity: m.Entity, ContentType: m.ContentType,
		EventTime: m.EventTime, CreatedAt: m.CreatedAt, NextAt: m.NextAt, DeadAt: m.DeadAt, Payload: payload,
		LastStatus: m.LastStatus, LastError: m.LastError, Class: m.Class, RedriveID: m.RedriveID,
		TraceParent: m.TraceParent, TraceState: m.TraceState, Log: log, Received: received,
	}
	for i := len(log) - 1; i >= 0 && log[i].RedriveID == m.RedriveID; i-- {
		e.Attempts++
	}
	return e, nil
}

// The record's stored form:
//
//	version byte 2 | fingerprint (8) | next at (8, big-endian unix ms) |
//	string redrive id | string event type, entity, content type, trace
//	parent, trace state, last error | varint event time, created (unix
//	ms, 0 for none) | uvarint tried, last status, class, size [| uvarint
//	received size, when not 0]
//
// where a string is a uvarint length and its bytes. The received size,
// last and only when not 0, leaves the records of envelopes without one
// as they were. The fingerprint, the
// next time and the redrive ID come first, at fixed places, so that a
// Redis script can read the fingerprint and redrive a letter (a new
// redrive ID, due now) without decoding the rest; a redrive ID is shorter
// than 128 bytes, so its length is one byte.
const metaVersion = 2

// MetaRedriveOffset is where the redrive ID's length byte is in a stored
// record (0-based); the bytes before it are the version, the fingerprint
// and the next time.
const MetaRedriveOffset = 17

var errBadMeta = errors.New("malformed stored envelope record")

// MarshalMeta encodes m for a store.
func MarshalMeta(m *Meta) []byte {
	b := make([]byte, 0, 48+len(m.RedriveID)+len(m.EventType)+len(m.Entity)+len(m.ContentType)+
		len(m.TraceParent)+len(m.TraceState)+len(m.LastError))
	b = append(b, metaVersion)
	b = append(b, m.Fingerprint[:]...)
	b = binary.BigEndian.AppendUint64(b, uint64(unixMs(m.NextAt)))
	for _, s := range []string{m.RedriveID, m.EventType, m.Entity, m.ContentType, m.TraceParent, m.TraceState, m.LastError} {
		b = wire.AppendString(b, s)
	}
	for _, t := range []time.Time{m.EventTime, m.CreatedAt} {
		b = binary.AppendVarint(b, unixMs(t))
	}
	for _, n := range []int{m.Tried, m.LastStatus, int(m.Class), m.Size} {
		b = binary.AppendUvarint(b, uint64(n))
	}
	if m.ReceivedSize > 0 {
		b = binary.AppendUvarint(b, uint64(m.ReceivedSize))
	}
	return b
}

// UnmarshalMeta decodes what MarshalMeta encoded, for the envelope id of
// dest.
func UnmarshalMeta(dest, id string, b []byte) (*Meta, error) {
	if len(b) < MetaRedriveOffset || b[0] != metaVersion {
		return nil, errBadMeta
	}
	m := &Meta{ID: id, Destination: dest, Fingerprint: [8]byte(b[1:9])}
	m.NextAt = fromUnixMs(int64(binary.BigEndian.Uint64(b[9:17])))
	d := wire.Decoder{Buf: b[MetaRedriveOffset:]}
	for _, s := range []*string{&m.RedriveID, &m.EventType, &m.Entity, &m.ContentType, &m.TraceParent, &m.TraceState, &m.LastError} {
		*s = d.LenString()
	}
	for _, t := range []*time.Time{&m.EventTime, &m.CreatedAt} {
		*t = fromUnixMs(d.Varint())
	}
	for _, n := range []*int{&m.Tried, &m.LastStatus, (*int)(nil), &m.Size} {
		v := d.Uvarint()
		if v > 1<<40 {
			return nil, errBadMeta
		}
		if n == nil {
			m.Class = Class(v)
			continue
		}
		*n = int(v)
	}
	if len(d.Buf) > 0 {
		v := d.Uvarint()
		if v == 0 || v > 1<<40 {
			return nil, errBadMeta
		}
		m.ReceivedSize = int(v)
	}
	if d.Err || len(d.Buf) != 0 {
		return nil, errBadMeta
	}
	return m, nil
}

// The attempt log's stored form is its attempts one after another, each
//
//	varint at (unix ms) | uvarint status | string error | uvarint latency
//	µs | string redrive id
//
// so that appending an attempt is appending its bytes.

// MarshalLog encodes an attempt log.
func MarshalLog(log []Attempt) []byte {
	var b []byte
	for _, a := range log {
		b = AppendAttempt(b, a)
	}
	return b
}

// AppendAttempt appends one attempt's stored form to b.
func AppendAttempt(b []byte, a Attempt) []byte {
	b = binary.AppendVarint(b, unixMs(a.At))
	b = binary.AppendUvarint(b, uint64(a.Status))
	b = wire.AppendString(b, a.Error)
	b = binary.AppendUvarint(b, uint64(a.Latency.Microseconds()))
	return wire.AppendString(b, a.RedriveID)
}

var errBadLog = errors.New("malformed stored attempt log")

// UnmarshalLog decodes what MarshalLog encoded.
func UnmarshalLog(b []byte) ([]Attempt, error) {
	var log []Attempt
	d := wire.Decoder{Buf: b}
	for len(d.Buf) > 0 {
		a := readAttempt(&d)
		if d.Err {
			return nil, errBadLog
		}
		log = append(log, a)
	}
	return log, nil
}

// readAttempt reads what AppendAttempt wrote.
func readAttempt(d *wire.Decoder) Attempt {
	var a Attempt
	a.At = fromUnixMs(d.Varint())
	a.Status = int(d.Uvarint())
	a.Error = d.LenString()
	a.Latency = time.Duration(d.Uvarint()) * time.Microsecond
	a.RedriveID = d.LenString()
	return a
}

// Event is one event as it comes in (package intake makes it), before it
// is an envelope: for one named destination (Envelope, then
// Sender.Enqueue), or for every destination that subscribes to its type
// (Destination.Events), each under the event's one ID (Sender.Publish).
type Event struct {
	ID        string
	EventType string
	// Tenant routes it to that tenant's subscribers only; "": to the
	// destinations of no tenant.
	Tenant      string
	Entity      string
	EventTime   time.Time
	Payload     []byte
	ContentType string
	TraceParent string
	TraceState  string
	// Received is what durable ingress keeps of the request; nil for an
	// event from the API.
	Received *Received
}

// Envelope is ev's envelope for dest, as Publish enqueues it: also what
// an enqueue to one named destination makes of an event.
func (ev *Event) Envelope(dest string) *Envelope {
	return &Envelope{
		ID: ev.ID, Destination: dest, EventType: ev.EventType, Entity: ev.Entity, EventTime: ev.EventTime,
		Payload: ev.Payload, ContentType: ev.ContentType, TraceParent: ev.TraceParent, TraceState: ev.TraceState,
		Received: ev.Received,
	}
}

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
	// Received is what durable ingress kept of the provider's request
	// (its headers, its path, the verified scheme); nil otherwise. It is
	// stored with the payload, and shares its life.
	Received *Received

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
	// PayloadExpired is set on a delivered envelope read from the history
	// once its payload is no longer kept (Payload is nil).
	PayloadExpired bool
}

// Attempt is one delivery attempt.
type Attempt struct {
	At        time.Time
	Status    int // 0: no response
	Error     string
	Latency   time.Duration
	RedriveID string
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

// MaxEntityLen is the longest entity an envelope may name, in bytes (as
// webhook_freshness's): under ordering entity, it is part of a store key.
const MaxEntityLen = 1024

// ErrEntityTooLong means an entity over MaxEntityLen bytes.
var ErrEntityTooLong = errors.New("entity too long")

// CheckEntity reports whether entity fits (MaxEntityLen); the error wraps
// ErrEntityTooLong, without echoing the entity.
func CheckEntity(entity string) error {
	if len(entity) > MaxEntityLen {
		return fmt.Errorf("%w: %d bytes, over %d", ErrEntityTooLong, len(entity), MaxEntityLen)
	}
	return nil
}

// PayloadFingerprint is the first 8 bytes of a payload's SHA-256: enough to tell
// a reused delivery ID's payload from the original (enqueuers are
// trusted).
func PayloadFingerprint(payload []byte) [8]byte {
	s := sha256.Sum256(payload)
	return [8]byte(s[:8])
}
