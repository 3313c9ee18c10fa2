/* A small JSON reader and builder for the C tests: enough to read the conformance
 * vectors and compare values as serde_json does (objects ignore key order; integers
 * compare exactly, as their digits are kept). */
#ifndef REDLOCK_TEST_JSON_H
#define REDLOCK_TEST_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum { JSON_NULL, JSON_BOOL, JSON_NUMBER, JSON_STRING, JSON_ARRAY, JSON_OBJECT } json_type;

typedef struct json {
    json_type type;
    bool boolean;
    /* JSON_NUMBER: the number's text; JSON_STRING: the decoded bytes (NUL-terminated). */
    char *text;
    size_t text_len;
    /* JSON_ARRAY and JSON_OBJECT: `count` items; objects also have `keys`. */
    struct json **items;
    char **keys;
    size_t count;
    size_t capacity;
} json;

/* Parses `len` bytes; NULL on a syntax error (with a message in `error`). */
json *json_parse(const char *text, size_t len, char *error, size_t error_len);
void json_free(json *value);

/* Readers. */
const json *json_get(const json *object, const char *key);
bool json_u64(const json *value, uint64_t *out);
bool json_i64(const json *value, int64_t *out);
bool json_double(const json *value, double *out);
const char *json_string(const json *value); /* NULL unless a string */

/* Builders (each returns a new value owned by the caller or by its container). */
json *json_new_null(void);
json *json_new_string(const void *bytes, size_t len);
json *json_new_u64(uint64_t value);
json *json_new_i64(int64_t value);
json *json_new_array(void);
json *json_new_object(void);
void json_push(json *array, json *item);
void json_set(json *object, const char *key, json *item);
json *json_clone(const json *value);

/* Equality as serde_json's Value: same type; objects as maps; numbers by value. */
bool json_equal(const json *a, const json *b);
/* Compact serialisation, for messages; free() the result. */
char *json_dump(const json *value);

/* Reads a whole file; free() the result. */
char *read_file(const char *path, size_t *out_len);

#endif
