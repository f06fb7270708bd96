package dedupe

import (
	"encoding/binary"
	"errors"
	"net/http"

	"github.com/hookgate/hookgate/internal/wire"
)

// A record's stored form, shared by the backends, is compact binary (it is
// decoded on every replay):
//
//	version byte (1) | flags byte (1: body omitted) | uvarint status |
//	uvarint header count | per header: string name, uvarint value count,
//	string values | body (the rest)
//
// where a string is a uvarint length and its bytes.
const recordVersion = 1

var errBadRecord = errors.New("malformed stored record")

// MarshalRecord encodes rec for a store.
func MarshalRecord(rec Record) []byte {
	n := 16 + len(rec.Body)
	for k, vs := range rec.Header {
		n += len(k) + 4
		for _, v := range vs {
			n += len(v) + 2
		}
	}
	b := make([]byte, 0, n)
	var flags byte
	if rec.BodyOmitted {
		flags = 1
	}
	b = append(b, recordVersion, flags)
	b = binary.AppendUvarint(b, uint64(rec.Status))
	b = binary.AppendUvarint(b, uint64(len(rec.Header)))
	for k, vs := range rec.Header {
		b = wire.AppendString(b, k)
		b = binary.AppendUvarint(b, uint64(len(vs)))
		for _, v := range vs {
			b = wire.AppendString(b, v)
		}
	}
	return append(b, rec.Body...)
}

// UnmarshalRecord decodes what MarshalRecord encoded.
func UnmarshalRecord(b []byte) (*Record, error) {
	d := wire.Decoder{Buf: b}
	if len(b) < 2 || b[0] != recordVersion {
		return nil, errBadRecord
	}
	rec := &Record{BodyOmitted: b[1]&1 != 0}
	d.Buf = b[2:]
	status := d.Uvarint()
	nh := d.Uvarint()
	if d.Err || status > 999 || nh > uint64(len(d.Buf)) {
		return nil, errBadRecord
	}
	rec.Status = int(status)
	rec.Header = make(http.Header, nh)
	for range nh {
		k := d.LenString()
		nv := d.Uvarint()
		if d.Err || nv > uint64(len(d.Buf)) {
			return nil, errBadRecord
		}
		vs := make([]string, nv)
		for i := range vs {
			vs[i] = d.LenString()
		}
		rec.Header[k] = vs
	}
	if d.Err {
		return nil, errBadRecord
	}
	if len(d.Buf) > 0 {
		rec.Body = append([]byte(nil), d.Buf...)
	}
	return rec, nil
}
