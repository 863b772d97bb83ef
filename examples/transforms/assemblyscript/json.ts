// A small JSON reader and writer over UTF-8 bytes in linear memory: checks
// that a text is one valid JSON value (RFC 8259: UTF-8, no trailing data,
// nesting at most 128 deep) and takes an object apart into its members,
// keeping each value as its raw JSON text, in order.

const MAX_DEPTH = 128;

// A growable byte buffer.
export class Buf {
  data: Uint8Array = new Uint8Array(256);
  len: u32 = 0;

  dataStart(): usize {
    return this.data.dataStart;
  }
  reserve(n: u32): void {
    if (this.len + n <= <u32>this.data.length) return;
    let cap = <u32>this.data.length * 2;
    while (cap < this.len + n) cap *= 2;
    const next = new Uint8Array(cap);
    memory.copy(next.dataStart, this.data.dataStart, this.len);
    this.data = next;
  }
  push(ptr: usize, n: u32): void {
    this.reserve(n);
    memory.copy(this.data.dataStart + this.len, ptr, n);
    this.len += n;
  }
  byte(b: u8): void {
    this.reserve(1);
    store<u8>(this.data.dataStart + this.len, b);
    this.len += 1;
  }
  u32(v: u32): void {
    this.reserve(4);
    store<u32>(this.data.dataStart + this.len, v);
    this.len += 4;
  }
  u64(v: u64): void {
    this.reserve(8);
    store<u64>(this.data.dataStart + this.len, v);
    this.len += 8;
  }
}

export class Member {
  constructor(public key: string, public valuePtr: usize, public valueLen: u32) {}
  isTrue(): bool {
    return this.valueLen == 4 && load<u32>(this.valuePtr) == 0x65757274; // "true"
  }
}

export enum JsonStatus {
  Ok,
  Invalid,
  NotObject,
}

export class Parsed {
  status: JsonStatus = JsonStatus.Ok;
  members: Member[] = [];
  error: string = "";
  at: u32 = 0;
}

class Parser {
  pos: usize;
  error: string | null = null;
  constructor(public start: usize, public end: usize) {
    this.pos = start;
  }

  fail(message: string): bool {
    if (this.error === null) this.error = message;
    return false;
  }
  peek(): i32 {
    return this.pos < this.end ? <i32>load<u8>(this.pos) : -1;
  }
  skipWs(): void {
    while (this.pos < this.end) {
      const c = load<u8>(this.pos);
      if (c != 0x20 && c != 0x09 && c != 0x0a && c != 0x0d) break;
      this.pos++;
    }
  }

  hex4(): i32 {
    if (this.end - this.pos < 4) return -1;
    let v = 0;
    for (let i = 0; i < 4; i++) {
      const c = <i32>load<u8>(this.pos + i);
      let d = -1;
      if (c >= 0x30 && c <= 0x39) d = c - 0x30;
      else if (c >= 0x61 && c <= 0x66) d = c - 0x61 + 10;
      else if (c >= 0x41 && c <= 0x46) d = c - 0x41 + 10;
      if (d < 0) return -1;
      v = (v << 4) | d;
    }
    this.pos += 4;
    return v;
  }

  // The length of the valid UTF-8 sequence at the cursor, or 0.
  utf8Len(): u32 {
    const c = <u32>load<u8>(this.pos);
    let n: u32, cp: u32;
    if (c < 0x80) return 1;
    if (c >= 0xc2 && c <= 0xdf) { n = 2; cp = c & 0x1f; }
    else if (c >= 0xe0 && c <= 0xef) { n = 3; cp = c & 0x0f; }
    else if (c >= 0xf0 && c <= 0xf4) { n = 4; cp = c & 0x07; }
    else return 0;
    if (<usize>n > this.end - this.pos) return 0;
    for (let i: u32 = 1; i < n; i++) {
      const b = <u32>load<u8>(this.pos + i);
      if ((b & 0xc0) != 0x80) return 0;
      cp = (cp << 6) | (b & 0x3f);
    }
    if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
    return n;
  }

  // A string token at the cursor; its decoded UTF-8 goes to `out` if given.
  string(out: Buf | null): bool {
    if (this.peek() != 0x22) return this.fail("expected a string");
    this.pos++;
    for (;;) {
      if (this.pos >= this.end) return this.fail("unterminated string");
      const c = load<u8>(this.pos);
      if (c == 0x22) {
        this.pos++;
        return true;
      }
      if (c < 0x20) return this.fail("control character in a string");
      if (c == 0x5c) {
        this.pos++;
        if (this.pos >= this.end) return this.fail("unterminated escape");
        const e = load<u8>(this.pos++);
        let simple: i32 = -1;
        if (e == 0x22) simple = 0x22;
        else if (e == 0x5c) simple = 0x5c;
        else if (e == 0x2f) simple = 0x2f;
        else if (e == 0x62) simple = 0x08;
        else if (e == 0x66) simple = 0x0c;
        else if (e == 0x6e) simple = 0x0a;
        else if (e == 0x72) simple = 0x0d;
        else if (e == 0x74) simple = 0x09;
        else if (e == 0x75) {
          let cp = this.hex4();
          if (cp < 0) return this.fail("invalid \\u escape");
          if (cp >= 0xdc00 && cp <= 0xdfff) return this.fail("lone low surrogate");
          if (cp >= 0xd800 && cp <= 0xdbff) {
            if (this.end - this.pos < 2 || load<u8>(this.pos) != 0x5c || load<u8>(this.pos + 1) != 0x75) {
              return this.fail("lone high surrogate");
            }
            this.pos += 2;
            const lo = this.hex4();
            if (lo < 0xdc00 || lo > 0xdfff) return this.fail("lone high surrogate");
            cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
          }
          if (out !== null) putUtf8(out, <u32>cp);
          continue;
        } else return this.fail("invalid escape");
        if (out !== null) out.byte(<u8>simple);
        continue;
      }
      const n = this.utf8Len();
      if (n == 0) return this.fail("invalid UTF-8");
      if (out !== null) out.push(this.pos, n);
      this.pos += n;
    }
    return false; // not reached: the loop returns
  }

  digits(): bool {
    const c = this.peek();
    if (c < 0x30 || c > 0x39) return this.fail("invalid number");
    while (this.peek() >= 0x30 && this.peek() <= 0x39) this.pos++;
    return true;
  }

  number(): bool {
    if (this.peek() == 0x2d) this.pos++;
    if (this.peek() == 0x30) this.pos++;
    else if (!this.digits()) return false;
    if (this.peek() == 0x2e) {
      this.pos++;
      if (!this.digits()) return false;
    }
    if (this.peek() == 0x65 || this.peek() == 0x45) {
      this.pos++;
      if (this.peek() == 0x2b || this.peek() == 0x2d) this.pos++;
      if (!this.digits()) return false;
    }
    return true;
  }

  literal(word: string): bool {
    const n = <usize>word.length;
    if (this.end - this.pos < n) return this.fail("expected a JSON value");
    for (let i: usize = 0; i < n; i++) {
      if (<i32>load<u8>(this.pos + i) != word.charCodeAt(<i32>i)) return this.fail("expected a JSON value");
    }
    this.pos += n;
    return true;
  }

  container(depth: i32, object: bool): bool {
    if (depth >= MAX_DEPTH) return this.fail("nested too deeply");
    const close = object ? 0x7d : 0x5d;
    this.pos++;
    this.skipWs();
    if (this.peek() == close) {
      this.pos++;
      return true;
    }
    for (;;) {
      if (object) {
        this.skipWs();
        if (!this.string(null)) return false;
        this.skipWs();
        if (this.peek() != 0x3a) return this.fail("expected ':'");
        this.pos++;
      }
      if (!this.value(depth + 1)) return false;
      this.skipWs();
      const c = this.peek();
      if (c == 0x2c) {
        this.pos++;
        continue;
      }
      if (c == close) {
        this.pos++;
        return true;
      }
      return this.fail(c < 0 ? "unterminated object or array" : object ? "expected ',' or '}'" : "expected ',' or ']'");
    }
    return false; // not reached: the loop returns
  }

  value(depth: i32): bool {
    this.skipWs();
    const c = this.peek();
    if (c < 0) return this.fail("expected a JSON value");
    if (c == 0x7b) return this.container(depth, true);
    if (c == 0x5b) return this.container(depth, false);
    if (c == 0x22) return this.string(null);
    if (c == 0x74) return this.literal("true");
    if (c == 0x66) return this.literal("false");
    if (c == 0x6e) return this.literal("null");
    return this.number();
  }
}

function putUtf8(b: Buf, cp: u32): void {
  if (cp < 0x80) {
    b.byte(<u8>cp);
  } else if (cp < 0x800) {
    b.byte(<u8>(0xc0 | (cp >> 6)));
    b.byte(<u8>(0x80 | (cp & 0x3f)));
  } else if (cp < 0x10000) {
    b.byte(<u8>(0xe0 | (cp >> 12)));
    b.byte(<u8>(0x80 | ((cp >> 6) & 0x3f)));
    b.byte(<u8>(0x80 | (cp & 0x3f)));
  } else {
    b.byte(<u8>(0xf0 | (cp >> 18)));
    b.byte(<u8>(0x80 | ((cp >> 12) & 0x3f)));
    b.byte(<u8>(0x80 | ((cp >> 6) & 0x3f)));
    b.byte(<u8>(0x80 | (cp & 0x3f)));
  }
}

// Parses the UTF-8 text at ptr..ptr+len as one JSON value and, if it is an
// object, takes it apart into members.
export function parseObject(ptr: usize, len: u32): Parsed {
  const out = new Parsed();
  const p = new Parser(ptr, ptr + len);
  let ok = p.value(0);
  if (ok) {
    p.skipWs();
    if (p.pos != p.end) ok = p.fail("trailing characters after the JSON value");
  }
  if (!ok) {
    out.status = JsonStatus.Invalid;
    out.error = p.error !== null ? <string>p.error : "invalid JSON";
    out.at = <u32>(p.pos - ptr);
    return out;
  }
  p.pos = ptr;
  p.skipWs();
  if (p.peek() != 0x7b) {
    out.status = JsonStatus.NotObject;
    return out;
  }
  // Valid: walk the top-level members again, keeping each one.
  p.pos++;
  for (;;) {
    p.skipWs();
    if (p.peek() == 0x7d) break;
    if (p.peek() == 0x2c) {
      p.pos++;
      p.skipWs();
    }
    const key = new Buf();
    p.string(key);
    p.skipWs();
    p.pos++; // ':'
    p.skipWs();
    const start = p.pos;
    p.value(1);
    out.members.push(new Member(String.UTF8.decodeUnsafe(key.dataStart(), key.len), start, <u32>(p.pos - start)));
  }
  return out;
}

// Decodes a raw JSON string token (with its quotes).
export function decodeString(ptr: usize, len: u32): string {
  const p = new Parser(ptr, ptr + len);
  const b = new Buf();
  p.string(b);
  return String.UTF8.decodeUnsafe(b.dataStart(), b.len);
}

// Appends `s` as a JSON string token (UTF-8).
export function encodeString(b: Buf, s: string): void {
  const hex = "0123456789abcdef";
  const utf8 = String.UTF8.encode(s);
  const ptr = changetype<usize>(utf8);
  const n = utf8.byteLength;
  b.byte(0x22);
  for (let i = 0; i < n; i++) {
    const c = load<u8>(ptr + i);
    if (c == 0x22) { b.byte(0x5c); b.byte(0x22); }
    else if (c == 0x5c) { b.byte(0x5c); b.byte(0x5c); }
    else if (c == 0x0a) { b.byte(0x5c); b.byte(0x6e); }
    else if (c == 0x0d) { b.byte(0x5c); b.byte(0x72); }
    else if (c == 0x09) { b.byte(0x5c); b.byte(0x74); }
    else if (c < 0x20) {
      b.byte(0x5c); b.byte(0x75); b.byte(0x30); b.byte(0x30);
      b.byte(<u8>hex.charCodeAt(c >> 4));
      b.byte(<u8>hex.charCodeAt(c & 0xf));
    } else b.byte(c);
  }
  b.byte(0x22);
}
