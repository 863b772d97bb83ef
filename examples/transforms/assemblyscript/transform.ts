// The reference transform, in AssemblyScript (world `bytes`: one encoded
// buffer in, one out; the encoding is in sdk/wit/README.md): parses the
// JSON value, uppercases one field, adds a field, drops records flagged for
// dropping, and fails a value that is not a JSON object with a `data`
// error. Tombstones pass untouched; everything else in a record (topic,
// key, headers, ...) is copied through unchanged.
//
// | key             | default      | meaning                                   |
// |-----------------|--------------|-------------------------------------------|
// | uppercase.field | status       | string field to uppercase                 |
// | add.field       | processed_by | field to add                              |
// | add.value       | sluice       | its value                                 |
// | drop.field      | drop         | records whose value has it set to `true` are dropped |
//
// AssemblyScript has no JSON in its standard library: json.ts is a small
// reader/writer that keeps an object's members as raw JSON, in order.

import { Buf, JsonStatus, parseObject, decodeString, encodeString } from "./json";

// ---- Memory shared with the host (the canonical ABI) ----

// Blocks handed to or received from the host live outside the garbage
// collector (heap.alloc). The host allocates the next call's argument only
// after it has read the previous result: that is when both are freed.
let lastInput: usize = 0;
let lastOutput: usize = 0;

export function cabi_realloc(old: usize, oldSize: usize, align: usize, newSize: usize): usize {
  if (old != 0) return heap.realloc(old, newSize);
  if (lastInput != 0) heap.free(lastInput);
  if (lastOutput != 0) heap.free(lastOutput);
  lastOutput = 0;
  lastInput = heap.alloc(newSize > 0 ? newSize : 1);
  return lastInput;
}

// Where a function returning list<u8> leaves (pointer, length).
const RET_AREA: usize = memory.data(8, 8);

function give(out: Buf): usize {
  const block = heap.alloc(out.len > 0 ? <usize>out.len : 1);
  memory.copy(block, out.dataStart(), out.len);
  if (lastOutput != 0) heap.free(lastOutput);
  lastOutput = block;
  store<u32>(RET_AREA, <u32>block);
  store<u32>(RET_AREA, <u32>out.len, 4);
  return RET_AREA;
}

// ---- The v1 encoding ----

class Reader {
  ok: bool = true;
  constructor(public ptr: usize, public end: usize) {}

  take(n: u64): usize {
    if (!this.ok || n > <u64>(this.end - this.ptr)) {
      this.ok = false;
      return 0;
    }
    const at = this.ptr;
    this.ptr += <usize>n;
    return at;
  }
  u8(): u8 {
    const at = this.take(1);
    return this.ok ? load<u8>(at) : 0;
  }
  u32(): u32 {
    const at = this.take(4);
    return this.ok ? load<u32>(at) : 0;
  }
  u64(): u64 {
    const at = this.take(8);
    return this.ok ? load<u64>(at) : 0;
  }
  bytes(): Slice {
    const len = this.u32();
    return new Slice(this.take(len), len);
  }
  optBytes(): Slice | null {
    const tag = this.u8();
    if (tag == 0) return null;
    if (tag != 1) this.ok = false;
    return this.bytes();
  }
}

// A range of bytes in linear memory (the input buffer, or a Buf).
class Slice {
  constructor(public ptr: usize, public len: u32) {}
  toString(): string {
    return String.UTF8.decodeUnsafe(this.ptr, this.len);
  }
}

function putBytes(w: Buf, s: Slice): void {
  w.u32(s.len);
  w.push(s.ptr, s.len);
}

function putOptBytes(w: Buf, s: Slice | null): void {
  if (s === null) {
    w.byte(0);
  } else {
    w.byte(1);
    putBytes(w, s);
  }
}

class Header {
  constructor(public key: Slice, public value: Slice | null) {}
}

class Record {
  topic!: Slice;
  partition: i32 = 0;
  offset: i64 = 0;
  hasTimestamp: bool = false;
  timestamp: i64 = 0;
  key: Slice | null = null;
  value: Slice | null = null;
  headers: Header[] = [];
  // A new value, when the transform changed it.
  newValue: Buf | null = null;

  static read(r: Reader): Record {
    const rec = new Record();
    rec.topic = r.bytes();
    rec.partition = <i32>r.u32();
    rec.offset = <i64>r.u64();
    const tag = r.u8();
    if (tag == 1) {
      rec.hasTimestamp = true;
      rec.timestamp = <i64>r.u64();
    } else if (tag != 0) {
      r.ok = false;
    }
    rec.key = r.optBytes();
    rec.value = r.optBytes();
    const n = r.u32();
    for (let i: u32 = 0; i < n && r.ok; i++) {
      const key = r.bytes();
      rec.headers.push(new Header(key, r.optBytes()));
    }
    return rec;
  }

  write(w: Buf): void {
    putBytes(w, this.topic);
    w.u32(<u32>this.partition);
    w.u64(<u64>this.offset);
    if (this.hasTimestamp) {
      w.byte(1);
      w.u64(<u64>this.timestamp);
    } else {
      w.byte(0);
    }
    putOptBytes(w, this.key);
    const nv = this.newValue;
    if (nv !== null) {
      w.byte(1);
      w.u32(nv.len);
      w.push(nv.dataStart(), nv.len);
    } else {
      putOptBytes(w, this.value);
    }
    w.u32(this.headers.length);
    for (let i = 0; i < this.headers.length; i++) {
      putBytes(w, this.headers[i].key);
      putOptBytes(w, this.headers[i].value);
    }
  }
}

const CLASS_DATA: u8 = 0;
const CLASS_FATAL: u8 = 2;

// ---- Config ----

let uppercaseField = "status";
let addField = "processed_by";
let addValue = "sluice";
let dropField = "drop";

function failStatus(w: Buf, message: string): void {
  w.byte(1);
  w.byte(CLASS_FATAL);
  const m = String.UTF8.encode(message);
  w.u32(<u32>m.byteLength);
  w.push(changetype<usize>(m), <u32>m.byteLength);
}

export function configure(ptr: usize, len: usize): usize {
  const r = new Reader(ptr, ptr + len);
  const w = new Buf();
  w.byte(1);
  if (r.u8() != 1) {
    failStatus(w, "configure: unknown config version");
    return give(w);
  }
  let up = "status", af = "processed_by", av = "sluice", df = "drop";
  const n = r.u32();
  for (let i: u32 = 0; i < n && r.ok; i++) {
    const key = r.bytes().toString();
    const value = r.bytes().toString();
    if (key == "uppercase.field") up = value;
    else if (key == "add.field") af = value;
    else if (key == "add.value") av = value;
    else if (key == "drop.field") df = value;
    else {
      failStatus(w, "unknown config key `" + key + "` (known: uppercase.field, add.field, add.value, drop.field)");
      return give(w);
    }
  }
  if (!r.ok) {
    failStatus(w, "configure: malformed config buffer");
    return give(w);
  }
  uppercaseField = up;
  addField = af;
  addValue = av;
  dropField = df;
  w.byte(0);
  return give(w);
}

// ---- The transform ----

// null to keep the record (its newValue set), "" to drop it, or a data
// error's message.
function apply(rec: Record): string | null {
  const value = rec.value;
  if (value === null) return null; // a tombstone passes through untouched
  const parsed = parseObject(value.ptr, value.len);
  if (parsed.status == JsonStatus.Invalid) {
    return "value of " + rec.topic.toString() + "-" + rec.partition.toString() + "@" +
      rec.offset.toString() + " is not JSON: " + parsed.error + " at byte " + parsed.at.toString();
  }
  if (parsed.status == JsonStatus.NotObject) return "value is JSON but not an object";
  const members = parsed.members;
  let upper = -1, added = -1;
  for (let i = 0; i < members.length; i++) {
    const key = members[i].key;
    if (key == dropField && members[i].isTrue()) return "";
    if (key == uppercaseField) upper = i;
    if (key == addField) added = i;
  }
  const out = new Buf();
  out.byte(0x7b); // {
  let first = true;
  for (let i = 0; i < members.length; i++) {
    const m = members[i];
    if (m.key == addField && i != added) continue; // an earlier duplicate
    if (!first) out.byte(0x2c); // ,
    first = false;
    encodeString(out, m.key);
    out.byte(0x3a); // :
    if (i == added) {
      encodeString(out, addValue);
    } else if (i == upper && load<u8>(m.valuePtr) == 0x22) {
      encodeString(out, decodeString(m.valuePtr, m.valueLen).toUpperCase());
    } else {
      out.push(m.valuePtr, m.valueLen);
    }
  }
  if (added < 0) {
    if (!first) out.byte(0x2c);
    encodeString(out, addField);
    out.byte(0x3a);
    encodeString(out, addValue);
  }
  out.byte(0x7d); // }
  rec.newValue = out;
  return null;
}

export function transform_batch(ptr: usize, len: usize): usize {
  const r = new Reader(ptr, ptr + len);
  const w = new Buf();
  if (r.u8() != 1) return give(new Buf()); // malformed: the host replays record by record
  const n = r.u32();
  w.byte(1);
  w.u32(n);
  for (let i: u32 = 0; i < n; i++) {
    const rec = Record.read(r);
    if (!r.ok) return give(new Buf());
    const failure = apply(rec);
    if (failure === null) {
      w.byte(0);
      w.u32(1);
      rec.write(w);
    } else if (failure.length == 0) {
      w.byte(0);
      w.u32(0);
    } else {
      w.byte(1);
      w.byte(CLASS_DATA);
      const m = String.UTF8.encode(failure);
      w.u32(<u32>m.byteLength);
      w.push(changetype<usize>(m), <u32>m.byteLength);
    }
  }
  return give(w);
}
