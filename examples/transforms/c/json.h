// A small JSON reader and writer for the reference transform: enough to
// take a JSON object apart into its members (kept as raw JSON text, in
// order), decode and encode strings, and check that a text is valid JSON
// (RFC 8259: UTF-8, no trailing data, nesting at most 128 deep).
#ifndef SLUICE_EXAMPLE_JSON_H
#define SLUICE_EXAMPLE_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

// A growable byte buffer.
typedef struct {
  uint8_t *ptr;
  size_t len;
  size_t cap;
} buf_t;

void buf_push(buf_t *b, const void *data, size_t len);
void buf_byte(buf_t *b, uint8_t c);

// One member of an object: its key, decoded (UTF-8, NUL-terminated), and
// its value as the raw JSON text in the input.
typedef struct {
  char *key;
  size_t key_len;
  const uint8_t *value;
  size_t value_len;
} json_member_t;

typedef struct {
  json_member_t *members;
  size_t len;
} json_object_t;

typedef enum {
  JSON_OK = 0,
  JSON_INVALID,     // not JSON
  JSON_NOT_OBJECT,  // JSON, but not an object
} json_status_t;

// Parses `text` as one JSON value. If it is an object, fills `out` (free it
// with json_object_free). On JSON_INVALID, `error` (if not NULL) is set to
// a static description and `*at` to the byte offset where parsing stopped.
json_status_t json_parse_object(const uint8_t *text, size_t len, json_object_t *out,
                                const char **error, size_t *at);
void json_object_free(json_object_t *o);

// Decodes a raw JSON string token (with its quotes) into UTF-8; false if
// `raw` is not a string. The result is NUL-terminated; free it.
bool json_string_decode(const uint8_t *raw, size_t len, char **out, size_t *out_len);
// Appends `s` (UTF-8) as a JSON string token.
void json_string_encode(buf_t *b, const char *s, size_t len);

#endif
