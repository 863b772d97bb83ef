// The reference transform, in Go (world `bytes`: one encoded buffer in, one
// out; the encoding is in sdk/wit/README.md): parses the JSON value,
// uppercases one field, adds a field, drops records flagged for dropping,
// and fails a value that is not a JSON object with a `data` error.
// Tombstones pass untouched; everything else in a record (topic, key,
// headers, ...) is copied through unchanged.
//
//	| key             | default      | meaning                                   |
//	|-----------------|--------------|-------------------------------------------|
//	| uppercase.field | status       | string field to uppercase                 |
//	| add.field       | processed_by | field to add                              |
//	| add.value       | sluice       | its value                                 |
//	| drop.field      | drop         | records whose value has it set to `true` are dropped |
//
// Built with GOOS=wasip1 GOARCH=wasm -buildmode=c-shared; the functions
// marked //go:wasmexport are the core module's exports.
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"
	"unsafe"
)

func main() {}

// ---- Memory shared with the host (the canonical ABI) ----

// live keeps the buffers handed to the host (its argument, our result)
// reachable, so the garbage collector leaves them alone while the host
// uses them. The host allocates the next call's argument only after it has
// read the previous result: that is when the old ones are let go.
var live [][]byte

//go:wasmexport cabi_realloc
func cabiRealloc(old unsafe.Pointer, oldSize, align, newSize uint32) unsafe.Pointer {
	if old == nil {
		live = live[:0]
	}
	// Backed by uint64s: 8-aligned, enough for any type.
	words := make([]uint64, (newSize+7)/8+1)
	block := unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), len(words)*8)
	if old != nil {
		copy(block, unsafe.Slice((*byte)(old), min(oldSize, newSize)))
	}
	live = append(live, block)
	return unsafe.Pointer(&block[0])
}

// retArea is where a function returning list<u8> leaves (pointer, length).
var retArea [2]uint32

func give(out []byte) unsafe.Pointer {
	if len(out) == 0 {
		out = make([]byte, 1)[:0]
	}
	live = append(live, out[:cap(out)])
	retArea[0] = uint32(uintptr(unsafe.Pointer(unsafe.SliceData(out))))
	retArea[1] = uint32(len(out))
	return unsafe.Pointer(&retArea)
}

// ---- The v1 encoding ----

type reader struct {
	buf []byte
	err error
}

func (r *reader) take(n uint64) []byte {
	if r.err != nil || uint64(len(r.buf)) < n {
		r.err = fmt.Errorf("truncated buffer")
		return nil
	}
	b := r.buf[:n]
	r.buf = r.buf[n:]
	return b
}

func (r *reader) u8() byte {
	if b := r.take(1); b != nil {
		return b[0]
	}
	return 0
}

func (r *reader) u32() uint32 {
	b := r.take(4)
	if b == nil {
		return 0
	}
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}

func (r *reader) u64() uint64 {
	return uint64(r.u32()) | uint64(r.u32())<<32
}

func (r *reader) bytes() []byte { return r.take(uint64(r.u32())) }

func (r *reader) optBytes() []byte {
	switch r.u8() {
	case 0:
		return nil
	case 1:
		if b := r.bytes(); b != nil {
			return b
		}
		return []byte{}
	default:
		r.err = fmt.Errorf("bad option tag")
		return nil
	}
}

type writer struct{ bytes.Buffer }

func (w *writer) u32(v uint32) {
	w.Write([]byte{byte(v), byte(v >> 8), byte(v >> 16), byte(v >> 24)})
}
func (w *writer) u64(v uint64) { w.u32(uint32(v)); w.u32(uint32(v >> 32)) }
func (w *writer) bytes(b []byte) {
	w.u32(uint32(len(b)))
	w.Write(b)
}
func (w *writer) optBytes(b []byte, some bool) {
	if !some {
		w.WriteByte(0)
		return
	}
	w.WriteByte(1)
	w.bytes(b)
}

type header struct {
	key      []byte
	value    []byte
	hasValue bool
}

type record struct {
	topic        []byte
	partition    int32
	offset       int64
	timestamp    int64
	hasTimestamp bool
	key, value   []byte
	hasKey       bool
	hasValue     bool
	headers      []header
}

func readRecord(r *reader) record {
	var rec record
	rec.topic = r.bytes()
	rec.partition = int32(r.u32())
	rec.offset = int64(r.u64())
	switch r.u8() {
	case 0:
	case 1:
		rec.timestamp, rec.hasTimestamp = int64(r.u64()), true
	default:
		r.err = fmt.Errorf("bad option tag")
	}
	rec.key = r.optBytes()
	rec.hasKey = rec.key != nil
	rec.value = r.optBytes()
	rec.hasValue = rec.value != nil
	n := r.u32()
	for i := uint32(0); i < n && r.err == nil; i++ {
		h := header{key: r.bytes()}
		h.value = r.optBytes()
		h.hasValue = h.value != nil
		rec.headers = append(rec.headers, h)
	}
	return rec
}

func (rec *record) write(w *writer) {
	w.bytes(rec.topic)
	w.u32(uint32(rec.partition))
	w.u64(uint64(rec.offset))
	if rec.hasTimestamp {
		w.WriteByte(1)
		w.u64(uint64(rec.timestamp))
	} else {
		w.WriteByte(0)
	}
	w.optBytes(rec.key, rec.hasKey)
	w.optBytes(rec.value, rec.hasValue)
	w.u32(uint32(len(rec.headers)))
	for _, h := range rec.headers {
		w.bytes(h.key)
		w.optBytes(h.value, h.hasValue)
	}
}

const (
	classData  = 0
	classFatal = 2
)

// ---- Config ----

type config struct {
	uppercaseField, addField, addValue, dropField string
}

var defaults = config{"status", "processed_by", "sluice", "drop"}
var cfg = defaults

//go:wasmexport configure
func configure(ptr unsafe.Pointer, length uint32) unsafe.Pointer {
	r := &reader{buf: unsafe.Slice((*byte)(ptr), length)}
	var w writer
	w.WriteByte(1)
	next := defaults
	if r.u8() != 1 {
		r.err = fmt.Errorf("unknown config version")
	}
	n := r.u32()
	for i := uint32(0); i < n && r.err == nil; i++ {
		key, value := string(r.bytes()), string(r.bytes())
		switch key {
		case "uppercase.field":
			next.uppercaseField = value
		case "add.field":
			next.addField = value
		case "add.value":
			next.addValue = value
		case "drop.field":
			next.dropField = value
		default:
			if r.err == nil {
				r.err = fmt.Errorf("unknown config key `%s` (known: uppercase.field, add.field, add.value, drop.field)", key)
			}
		}
	}
	if r.err != nil {
		w.WriteByte(1)
		w.WriteByte(classFatal)
		w.bytes([]byte(r.err.Error()))
	} else {
		cfg = next
		w.WriteByte(0)
	}
	return give(w.Bytes())
}

// ---- The transform ----

// member is one member of a JSON object, its value kept as raw JSON.
type member struct {
	key   string
	value json.RawMessage
}

// parseObject reads a JSON object's members in order; notObject says the
// value is valid JSON of another kind.
func parseObject(value []byte) (members []member, notObject bool, err error) {
	if !utf8.Valid(value) {
		// encoding/json would replace invalid UTF-8; JSON text is UTF-8.
		return nil, false, fmt.Errorf("invalid UTF-8")
	}
	if !json.Valid(value) {
		var v any
		err = json.Unmarshal(value, &v)
		if err == nil {
			err = fmt.Errorf("invalid JSON")
		}
		return nil, false, err
	}
	dec := json.NewDecoder(bytes.NewReader(value))
	tok, _ := dec.Token()
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, true, nil
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, false, err
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, false, err
		}
		members = append(members, member{tok.(string), raw})
	}
	return members, false, nil
}

func encodeString(s string) json.RawMessage {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return bytes.TrimRight(b.Bytes(), "\n")
}

// apply returns the records rec becomes, or a data error's message.
func apply(rec record) ([]record, string) {
	if !rec.hasValue {
		return []record{rec}, "" // a tombstone passes through untouched
	}
	members, notObject, err := parseObject(rec.value)
	if err != nil {
		return nil, fmt.Sprintf("value of %s-%d@%d is not JSON: %v", rec.topic, rec.partition, rec.offset, err)
	}
	if notObject {
		return nil, "value is JSON but not an object"
	}
	added := false
	for i := range members {
		m := &members[i]
		switch m.key {
		case cfg.dropField:
			if string(m.value) == "true" {
				return []record{}, ""
			}
		}
		if m.key == cfg.uppercaseField {
			var s string
			if json.Unmarshal(m.value, &s) == nil && m.value[0] == '"' {
				m.value = encodeString(strings.ToUpper(s))
			}
		}
		if m.key == cfg.addField {
			m.value = encodeString(cfg.addValue)
			added = true
		}
	}
	if !added {
		members = append(members, member{cfg.addField, encodeString(cfg.addValue)})
	}
	var out bytes.Buffer
	out.WriteByte('{')
	for i, m := range members {
		if i > 0 {
			out.WriteByte(',')
		}
		out.Write(encodeString(m.key))
		out.WriteByte(':')
		out.Write(m.value)
	}
	out.WriteByte('}')
	rec.value = out.Bytes()
	return []record{rec}, ""
}

//go:wasmexport transform-batch
func transformBatch(ptr unsafe.Pointer, length uint32) unsafe.Pointer {
	r := &reader{buf: unsafe.Slice((*byte)(ptr), length)}
	var w writer
	if r.u8() != 1 {
		return give(nil) // malformed: the host replays record by record
	}
	n := r.u32()
	w.WriteByte(1)
	w.u32(n)
	for i := uint32(0); i < n; i++ {
		rec := readRecord(r)
		if r.err != nil {
			return give(nil)
		}
		out, failure := apply(rec)
		if failure != "" {
			w.WriteByte(1)
			w.WriteByte(classData)
			w.bytes([]byte(failure))
			continue
		}
		w.WriteByte(0)
		w.u32(uint32(len(out)))
		for j := range out {
			out[j].write(&w)
		}
	}
	return give(w.Bytes())
}
