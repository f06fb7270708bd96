package dedupe

import (
	"encoding/binary"
	"errors"
	"net/http"
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
		b = appendString(b, k)
		b = binary.AppendUvarint(b, uint64(len(vs)))
		for _, v := range vs {
			b = appendString(b, v)
		}
	}
	return append(b, rec.Body...)
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// UnmarshalRecord decodes what MarshalRecord encoded.
func UnmarshalRecord(b []byte) (*Record, error) {
	d := decoder{b: b}
	if len(b) < 2 || b[0] != recordVersion {
		return nil, errBadRecord
	}
	rec := &Record{BodyOmitted: b[1]&1 != 0}
	d.b = b[2:]
	status := d.uvarint()
	nh := d.uvarint()
	if d.err || status > 999 || nh > uint64(len(d.b)) {
		return nil, errBadRecord
	}
	rec.Status = int(status)
	rec.Header = make(http.Header, nh)
	for range nh {
		k := d.string()
		nv := d.uvarint()
		if d.err || nv > uint64(len(d.b)) {
			return nil, errBadRecord
		}
		vs := make([]string, nv)
		for i := range vs {
			vs[i] = d.string()
		}
		rec.Header[k] = vs
	}
	if d.err {
		return nil, errBadRecord
	}
	if len(d.b) > 0 {
		rec.Body = append([]byte(nil), d.b...)
	}
	return rec, nil
}

type decoder struct {
	b   []byte
	err bool
}

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = true
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) string() string {
	n := d.uvarint()
	if d.err || n > uint64(len(d.b)) {
		d.err = true
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}
