package protocol

import (
	"encoding/binary"
	"fmt"
	"unicode/utf8"
)

// encoder appends the canonical encoding of fields. Every variable-length
// field is uvarint-length-prefixed; integers are fixed-width big-endian.
type encoder struct{ b []byte }

func (e *encoder) u8(v uint8) { e.b = append(e.b, v) }
func (e *encoder) flag(v bool) {
	if v {
		e.u8(1)
	} else {
		e.u8(0)
	}
}
func (e *encoder) u16(v uint16) { e.b = binary.BigEndian.AppendUint16(e.b, v) }
func (e *encoder) u64(v uint64) { e.b = binary.BigEndian.AppendUint64(e.b, v) }
func (e *encoder) bytes(v []byte) {
	e.b = binary.AppendUvarint(e.b, uint64(len(v)))
	e.b = append(e.b, v...)
}
func (e *encoder) str(v string)     { e.bytes([]byte(v)) }
func (e *encoder) uvarint(v uint64) { e.b = binary.AppendUvarint(e.b, v) }
func (e *encoder) fixed(v []byte) {
	e.b = append(e.b, v...)
}

// decoder reads what encoder wrote and refuses anything else: truncated
// input, over-long fields, non-minimal varints and trailing bytes.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s", ErrMalformed, fmt.Sprintf(format, args...))
	}
}

func (d *decoder) take(n int, what string) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || len(d.b) < n {
		d.fail("%s: truncated", what)
		return nil
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) u8(what string) uint8 {
	v := d.take(1, what)
	if v == nil {
		return 0
	}
	return v[0]
}

// flag decodes a boolean byte: 0 or 1, nothing else.
func (d *decoder) flag(what string) bool {
	switch d.u8(what) {
	case 0:
		return false
	case 1:
		return true
	default:
		d.fail("%s not 0 or 1", what)
		return false
	}
}

func (d *decoder) u16(what string) uint16 {
	v := d.take(2, what)
	if v == nil {
		return 0
	}
	return binary.BigEndian.Uint16(v)
}

// more reports whether bytes are left (and no error so far): how a
// decoder sees an optional trailing field.
func (d *decoder) more() bool { return d.err == nil && len(d.b) > 0 }

func (d *decoder) u64(what string) uint64 {
	v := d.take(8, what)
	if v == nil {
		return 0
	}
	return binary.BigEndian.Uint64(v)
}

// uvarint decodes a minimally encoded uvarint.
func (d *decoder) uvarint(what string) uint64 {
	if d.err != nil {
		return 0
	}
	n, k := binary.Uvarint(d.b)
	if k <= 0 {
		d.fail("%s: bad varint", what)
		return 0
	}
	if k != uvarintLen(n) {
		d.fail("%s: non-minimal varint", what)
		return 0
	}
	d.b = d.b[k:]
	return n
}

func (d *decoder) bytes(what string, max int) []byte {
	if d.err != nil {
		return nil
	}
	n, k := binary.Uvarint(d.b)
	if k <= 0 {
		d.fail("%s: bad length", what)
		return nil
	}
	if k != uvarintLen(n) {
		d.fail("%s: non-minimal length", what)
		return nil
	}
	if n > uint64(max) {
		d.fail("%s: %d bytes exceeds limit %d", what, n, max)
		return nil
	}
	d.b = d.b[k:]
	v := d.take(int(n), what)
	if v == nil {
		return nil
	}
	return append([]byte(nil), v...)
}

func (d *decoder) str(what string, max int) string {
	v := d.bytes(what, max)
	if d.err == nil && !utf8.Valid(v) {
		d.fail("%s: not UTF-8", what)
	}
	return string(v)
}

// finish reports the first error, or trailing bytes.
func (d *decoder) finish() error {
	if d.err == nil && len(d.b) != 0 {
		d.fail("%d trailing bytes", len(d.b))
	}
	return d.err
}

func uvarintLen(v uint64) int {
	var buf [binary.MaxVarintLen64]byte
	return binary.PutUvarint(buf[:], v)
}

// decode runs fn over b as one whole message: the version byte first, and
// nothing may follow. On any error it returns the zero value.
func decode[T any](b []byte, fn func(d *decoder) T) (T, error) {
	d := decoder{b: b}
	d.version()
	m := fn(&d)
	if err := d.finish(); err != nil {
		var zero T
		return zero, err
	}
	return m, nil
}
