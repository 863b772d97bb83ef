#include "json.h"

#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH 128

void buf_push(buf_t *b, const void *data, size_t len) {
  if (b->len + len > b->cap) {
    size_t cap = b->cap ? b->cap : 64;
    while (cap < b->len + len) cap *= 2;
    uint8_t *p = realloc(b->ptr, cap);
    if (!p) abort();
    b->ptr = p;
    b->cap = cap;
  }
  memcpy(b->ptr + b->len, data, len);
  b->len += len;
}

void buf_byte(buf_t *b, uint8_t c) { buf_push(b, &c, 1); }

// The parser: a cursor over the text, and the first error met.
typedef struct {
  const uint8_t *s;
  size_t len;
  size_t pos;
  const char *error;
} parser_t;

static bool fail(parser_t *p, const char *error) {
  if (!p->error) p->error = error;
  return false;
}

static void skip_ws(parser_t *p) {
  while (p->pos < p->len) {
    uint8_t c = p->s[p->pos];
    if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
    p->pos++;
  }
}

static int hex_digit(uint8_t c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

static bool read_hex4(parser_t *p, uint32_t *out) {
  if (p->pos + 4 > p->len) return fail(p, "truncated \\u escape");
  uint32_t v = 0;
  for (int i = 0; i < 4; i++) {
    int d = hex_digit(p->s[p->pos + i]);
    if (d < 0) return fail(p, "invalid \\u escape");
    v = v << 4 | (uint32_t)d;
  }
  p->pos += 4;
  *out = v;
  return true;
}

static void put_utf8(buf_t *b, uint32_t cp) {
  uint8_t u[4];
  size_t n;
  if (cp < 0x80) {
    u[0] = (uint8_t)cp;
    n = 1;
  } else if (cp < 0x800) {
    u[0] = (uint8_t)(0xC0 | cp >> 6);
    u[1] = (uint8_t)(0x80 | (cp & 0x3F));
    n = 2;
  } else if (cp < 0x10000) {
    u[0] = (uint8_t)(0xE0 | cp >> 12);
    u[1] = (uint8_t)(0x80 | (cp >> 6 & 0x3F));
    u[2] = (uint8_t)(0x80 | (cp & 0x3F));
    n = 3;
  } else {
    u[0] = (uint8_t)(0xF0 | cp >> 18);
    u[1] = (uint8_t)(0x80 | (cp >> 12 & 0x3F));
    u[2] = (uint8_t)(0x80 | (cp >> 6 & 0x3F));
    u[3] = (uint8_t)(0x80 | (cp & 0x3F));
    n = 4;
  }
  buf_push(b, u, n);
}

// Length of the valid UTF-8 sequence at s[0..len), or 0 if invalid.
static size_t utf8_len(const uint8_t *s, size_t len) {
  uint8_t c = s[0];
  size_t n;
  uint32_t cp;
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
    cp = c & 0x1F;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    cp = c & 0x0F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    cp = c & 0x07;
  } else {
    return 0;
  }
  if (n > len) return 0;
  for (size_t i = 1; i < n; i++) {
    if ((s[i] & 0xC0) != 0x80) return 0;
    cp = cp << 6 | (s[i] & 0x3F);
  }
  // Overlong forms, surrogates and code points past U+10FFFF are invalid.
  if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
      (cp >= 0xD800 && cp <= 0xDFFF))
    return 0;
  return n;
}

// A string token at the cursor; its decoded text goes to `out` if not NULL.
static bool parse_string(parser_t *p, buf_t *out) {
  if (p->pos >= p->len || p->s[p->pos] != '"') return fail(p, "expected a string");
  p->pos++;
  for (;;) {
    if (p->pos >= p->len) return fail(p, "unterminated string");
    uint8_t c = p->s[p->pos];
    if (c == '"') {
      p->pos++;
      return true;
    }
    if (c < 0x20) return fail(p, "control character in a string");
    if (c == '\\') {
      p->pos++;
      if (p->pos >= p->len) return fail(p, "unterminated escape");
      uint8_t e = p->s[p->pos++];
      uint8_t simple = 0;
      switch (e) {
        case '"': simple = '"'; break;
        case '\\': simple = '\\'; break;
        case '/': simple = '/'; break;
        case 'b': simple = '\b'; break;
        case 'f': simple = '\f'; break;
        case 'n': simple = '\n'; break;
        case 'r': simple = '\r'; break;
        case 't': simple = '\t'; break;
        case 'u': {
          uint32_t cp;
          if (!read_hex4(p, &cp)) return false;
          if (cp >= 0xDC00 && cp <= 0xDFFF) return fail(p, "lone low surrogate");
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            uint32_t lo;
            if (p->pos + 2 > p->len || p->s[p->pos] != '\\' || p->s[p->pos + 1] != 'u')
              return fail(p, "lone high surrogate");
            p->pos += 2;
            if (!read_hex4(p, &lo)) return false;
            if (lo < 0xDC00 || lo > 0xDFFF) return fail(p, "lone high surrogate");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          }
          if (out) put_utf8(out, cp);
          continue;
        }
        default:
          return fail(p, "invalid escape");
      }
      if (out) buf_byte(out, simple);
      continue;
    }
    size_t n = utf8_len(p->s + p->pos, p->len - p->pos);
    if (!n) return fail(p, "invalid UTF-8");
    if (out) buf_push(out, p->s + p->pos, n);
    p->pos += n;
  }
}

static bool is_digit(parser_t *p) {
  return p->pos < p->len && p->s[p->pos] >= '0' && p->s[p->pos] <= '9';
}

static bool parse_number(parser_t *p) {
  if (p->pos < p->len && p->s[p->pos] == '-') p->pos++;
  if (!is_digit(p)) return fail(p, "invalid number");
  if (p->s[p->pos] == '0') {
    p->pos++;
  } else {
    while (is_digit(p)) p->pos++;
  }
  if (p->pos < p->len && p->s[p->pos] == '.') {
    p->pos++;
    if (!is_digit(p)) return fail(p, "invalid number");
    while (is_digit(p)) p->pos++;
  }
  if (p->pos < p->len && (p->s[p->pos] == 'e' || p->s[p->pos] == 'E')) {
    p->pos++;
    if (p->pos < p->len && (p->s[p->pos] == '+' || p->s[p->pos] == '-')) p->pos++;
    if (!is_digit(p)) return fail(p, "invalid number");
    while (is_digit(p)) p->pos++;
  }
  return true;
}

static bool parse_literal(parser_t *p, const char *word) {
  size_t n = strlen(word);
  if (p->pos + n > p->len || memcmp(p->s + p->pos, word, n) != 0)
    return fail(p, "expected a JSON value");
  p->pos += n;
  return true;
}

static bool parse_value(parser_t *p, int depth);

// An object or array at the cursor (its opening bracket included).
static bool parse_container(parser_t *p, int depth, bool object) {
  if (depth >= MAX_DEPTH) return fail(p, "nested too deeply");
  uint8_t close = object ? '}' : ']';
  p->pos++;
  skip_ws(p);
  if (p->pos < p->len && p->s[p->pos] == close) {
    p->pos++;
    return true;
  }
  for (;;) {
    if (object) {
      skip_ws(p);
      if (!parse_string(p, NULL)) return false;
      skip_ws(p);
      if (p->pos >= p->len || p->s[p->pos] != ':') return fail(p, "expected ':'");
      p->pos++;
    }
    if (!parse_value(p, depth + 1)) return false;
    skip_ws(p);
    if (p->pos >= p->len) return fail(p, "unterminated object or array");
    if (p->s[p->pos] == ',') {
      p->pos++;
      continue;
    }
    if (p->s[p->pos] == close) {
      p->pos++;
      return true;
    }
    return fail(p, object ? "expected ',' or '}'" : "expected ',' or ']'");
  }
}

static bool parse_value(parser_t *p, int depth) {
  skip_ws(p);
  if (p->pos >= p->len) return fail(p, "expected a JSON value");
  switch (p->s[p->pos]) {
    case '{': return parse_container(p, depth, true);
    case '[': return parse_container(p, depth, false);
    case '"': return parse_string(p, NULL);
    case 't': return parse_literal(p, "true");
    case 'f': return parse_literal(p, "false");
    case 'n': return parse_literal(p, "null");
    default: return parse_number(p);
  }
}

json_status_t json_parse_object(const uint8_t *text, size_t len, json_object_t *out,
                                const char **error, size_t *at) {
  parser_t p = {text, len, 0, NULL};
  out->members = NULL;
  out->len = 0;
  // The whole text must be one valid value.
  if (!parse_value(&p, 0) || (skip_ws(&p), p.pos != p.len)) {
    if (error) *error = p.error ? p.error : "trailing characters after the JSON value";
    if (at) *at = p.pos;
    return JSON_INVALID;
  }
  p.pos = 0;
  skip_ws(&p);
  if (p.s[p.pos] != '{') return JSON_NOT_OBJECT;
  // Valid: walk the top-level members again, keeping each one.
  size_t cap = 0;
  p.pos++;
  for (;;) {
    skip_ws(&p);
    if (p.s[p.pos] == '}') break;
    if (p.s[p.pos] == ',') {
      p.pos++;
      skip_ws(&p);
    }
    buf_t key = {0};
    parse_string(&p, &key);
    buf_byte(&key, 0);
    skip_ws(&p);
    p.pos++;  // ':'
    skip_ws(&p);
    size_t start = p.pos;
    parse_value(&p, 1);
    if (out->len == cap) {
      cap = cap ? cap * 2 : 8;
      json_member_t *m = realloc(out->members, cap * sizeof(json_member_t));
      if (!m) abort();
      out->members = m;
    }
    out->members[out->len++] = (json_member_t){
        (char *)key.ptr, key.len - 1, text + start, p.pos - start};
  }
  return JSON_OK;
}

void json_object_free(json_object_t *o) {
  for (size_t i = 0; i < o->len; i++) free(o->members[i].key);
  free(o->members);
  o->members = NULL;
  o->len = 0;
}

bool json_string_decode(const uint8_t *raw, size_t len, char **out, size_t *out_len) {
  parser_t p = {raw, len, 0, NULL};
  buf_t b = {0};
  if (!parse_string(&p, &b) || p.pos != len) {
    free(b.ptr);
    return false;
  }
  buf_byte(&b, 0);
  *out = (char *)b.ptr;
  *out_len = b.len - 1;
  return true;
}

void json_string_encode(buf_t *b, const char *s, size_t len) {
  static const char hex[] = "0123456789abcdef";
  buf_byte(b, '"');
  for (size_t i = 0; i < len; i++) {
    uint8_t c = (uint8_t)s[i];
    switch (c) {
      case '"': buf_push(b, "\\\"", 2); break;
      case '\\': buf_push(b, "\\\\", 2); break;
      case '\n': buf_push(b, "\\n", 2); break;
      case '\r': buf_push(b, "\\r", 2); break;
      case '\t': buf_push(b, "\\t", 2); break;
      case '\b': buf_push(b, "\\b", 2); break;
      case '\f': buf_push(b, "\\f", 2); break;
      default:
        if (c < 0x20) {
          char e[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 0xF]};
          buf_push(b, e, 6);
        } else {
          buf_byte(b, c);
        }
    }
  }
  buf_byte(b, '"');
}
