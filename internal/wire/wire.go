// Package wire holds the varint primitives of hookgate's stored forms (the
// dedupe record, the sender's envelope): length-prefixed strings and a
// decoder that turns any read past the end into one error flag.
package wire

import "encoding/binary"

// AppendString appends s with its uvarint length.
func AppendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// Decoder reads a stored form. A read past the end or a bad varint sets
// Err and empties Buf, so every later read fails too: callers check Err
// once, at the end.
type Decoder struct {
	Buf []byte // what is left to read
	Err bool
}

// Uvarint reads an unsigned varint.
func (d *Decoder) Uvarint() uint64 {
	v, n := binary.Uvarint(d.Buf)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.Buf = d.Buf[n:]
	return v
}

// Varint reads a signed varint.
func (d *Decoder) Varint() int64 {
	v, n := binary.Varint(d.Buf)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.Buf = d.Buf[n:]
	return v
}

// LenString reads what AppendString wrote.
func (d *Decoder) LenString() string {
	n := d.Uvarint()
	if n > uint64(len(d.Buf)) {
		d.fail()
		return ""
	}
	s := string(d.Buf[:n])
	d.Buf = d.Buf[n:]
	return s
}

func (d *Decoder) fail() {
	d.Err = true
	d.Buf = nil
}
