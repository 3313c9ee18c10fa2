#include "json.h"

#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(2);
    }
    return p;
}

static void *xrealloc(void *p, size_t n) {
    p = realloc(p, n ? n : 1);
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(2);
    }
    return p;
}

static json *new_value(json_type type) {
    json *v = xmalloc(sizeof *v);
    memset(v, 0, sizeof *v);
    v->type = type;
    return v;
}

void json_free(json *v) {
    if (!v) return;
    for (size_t i = 0; i < v->count; i++) {
        json_free(v->items[i]);
        if (v->keys) free(v->keys[i]);
    }
    free(v->items);
    free(v->keys);
    free(v->text);
    free(v);
}

/* ---- parser -------------------------------------------------------------------- */

typedef struct {
    const char *p, *end;
    char *error;
    size_t error_len;
    int depth;
} parser;

static void skip_ws(parser *ps) {
    while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\n' || *ps->p == '\r' || *ps->p == '\t'))
        ps->p++;
}

static json *fail(parser *ps, const char *what) {
    if (ps->error && ps->error_len) snprintf(ps->error, ps->error_len, "%s", what);
    return NULL;
}

static void grow(json *v) {
    if (v->count == v->capacity) {
        v->capacity = v->capacity ? v->capacity * 2 : 4;
        v->items = xrealloc(v->items, v->capacity * sizeof *v->items);
        if (v->type == JSON_OBJECT) v->keys = xrealloc(v->keys, v->capacity * sizeof *v->keys);
    }
}

static void put_utf8(char **buf, size_t *len, size_t *cap, uint32_t cp) {
    if (*len + 4 >= *cap) {
        *cap = *cap * 2 + 8;
        *buf = xrealloc(*buf, *cap);
    }
    char *o = *buf + *len;
    if (cp < 0x80) {
        o[0] = (char)cp;
        *len += 1;
    } else if (cp < 0x800) {
        o[0] = (char)(0xC0 | (cp >> 6));
        o[1] = (char)(0x80 | (cp & 0x3F));
        *len += 2;
    } else if (cp < 0x10000) {
        o[0] = (char)(0xE0 | (cp >> 12));
        o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (char)(0x80 | (cp & 0x3F));
        *len += 3;
    } else {
        o[0] = (char)(0xF0 | (cp >> 18));
        o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
        o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[3] = (char)(0x80 | (cp & 0x3F));
        *len += 4;
    }
}

static bool hex4(parser *ps, uint32_t *out) {
    if (ps->end - ps->p < 4) return false;
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) {
        char c = *ps->p++;
        v <<= 4;
        if (c >= '0' && c <= '9') v |= (uint32_t)(c - '0');
        else if (c >= 'a' && c <= 'f') v |= (uint32_t)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') v |= (uint32_t)(c - 'A' + 10);
        else return false;
    }
    *out = v;
    return true;
}

/* Parses a string at ps->p (after the opening quote) into a new buffer. */
static char *parse_string_raw(parser *ps, size_t *out_len) {
    size_t len = 0, cap = 16;
    char *buf = xmalloc(cap);
    while (ps->p < ps->end) {
        char c = *ps->p++;
        if (c == '"') {
            buf[len] = '\0';
            *out_len = len;
            return buf;
        }
        if ((unsigned char)c < 0x20) break;
        if (c != '\\') {
            if (len + 1 >= cap) {
                cap *= 2;
                buf = xrealloc(buf, cap);
            }
            buf[len++] = c;
            continue;
        }
        if (ps->p >= ps->end) break;
        char e = *ps->p++;
        uint32_t cp;
        switch (e) {
        case '"': cp = '"'; break;
        case '\\': cp = '\\'; break;
        case '/': cp = '/'; break;
        case 'b': cp = '\b'; break;
        case 'f': cp = '\f'; break;
        case 'n': cp = '\n'; break;
        case 'r': cp = '\r'; break;
        case 't': cp = '\t'; break;
        case 'u':
            if (!hex4(ps, &cp)) goto bad;
            if (cp >= 0xD800 && cp < 0xDC00) {
                uint32_t low;
                if (ps->end - ps->p < 6 || ps->p[0] != '\\' || ps->p[1] != 'u') goto bad;
                ps->p += 2;
                if (!hex4(ps, &low) || low < 0xDC00 || low >= 0xE000) goto bad;
                cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
            }
            break;
        default: goto bad;
        }
        put_utf8(&buf, &len, &cap, cp);
    }
bad:
    free(buf);
    return NULL;
}

static json *parse_value(parser *ps);

static json *parse_number(parser *ps) {
    const char *start = ps->p;
    if (ps->p < ps->end && *ps->p == '-') ps->p++;
    if (ps->p >= ps->end || !(*ps->p >= '0' && *ps->p <= '9')) return fail(ps, "bad number");
    while (ps->p < ps->end && strchr("0123456789.eE+-", *ps->p)) ps->p++;
    json *v = new_value(JSON_NUMBER);
    v->text_len = (size_t)(ps->p - start);
    v->text = xmalloc(v->text_len + 1);
    memcpy(v->text, start, v->text_len);
    v->text[v->text_len] = '\0';
    return v;
}

static bool literal(parser *ps, const char *word) {
    size_t n = strlen(word);
    if ((size_t)(ps->end - ps->p) < n || memcmp(ps->p, word, n) != 0) return false;
    ps->p += n;
    return true;
}

static json *parse_value(parser *ps) {
    skip_ws(ps);
    if (ps->p >= ps->end) return fail(ps, "unexpected end");
    if (++ps->depth > 128) return fail(ps, "too deep"); /* serde_json's limit */
    json *v = NULL;
    char c = *ps->p;
    if (c == '{' || c == '[') {
        bool object = c == '{';
        char close = object ? '}' : ']';
        ps->p++;
        v = new_value(object ? JSON_OBJECT : JSON_ARRAY);
        skip_ws(ps);
        if (ps->p < ps->end && *ps->p == close) {
            ps->p++;
        } else {
            for (;;) {
                char *key = NULL;
                if (object) {
                    skip_ws(ps);
                    size_t key_len;
                    if (ps->p >= ps->end || *ps->p != '"') goto bad;
                    ps->p++;
                    key = parse_string_raw(ps, &key_len);
                    if (!key) goto bad;
                    skip_ws(ps);
                    if (ps->p >= ps->end || *ps->p != ':') {
                        free(key);
                        goto bad;
                    }
                    ps->p++;
                }
                json *item = parse_value(ps);
                if (!item) {
                    free(key);
                    goto bad;
                }
                grow(v);
                v->items[v->count] = item;
                if (object) v->keys[v->count] = key;
                v->count++;
                skip_ws(ps);
                if (ps->p < ps->end && *ps->p == ',') {
                    ps->p++;
                    continue;
                }
                if (ps->p < ps->end && *ps->p == close) {
                    ps->p++;
                    break;
                }
                goto bad;
            }
        }
    } else if (c == '"') {
        ps->p++;
        v = new_value(JSON_STRING);
        v->text = parse_string_raw(ps, &v->text_len);
        if (!v->text) goto bad;
    } else if (literal(ps, "null")) {
        v = new_value(JSON_NULL);
    } else if (literal(ps, "true")) {
        v = new_value(JSON_BOOL);
        v->boolean = true;
    } else if (literal(ps, "false")) {
        v = new_value(JSON_BOOL);
    } else {
        v = parse_number(ps);
    }
    ps->depth--;
    return v;
bad:
    json_free(v);
    return fail(ps, "syntax error");
}

json *json_parse(const char *text, size_t len, char *error, size_t error_len) {
    parser ps = {text, text + len, error, error_len, 0};
    json *v = parse_value(&ps);
    if (!v) return NULL;
    skip_ws(&ps);
    if (ps.p != ps.end) {
        json_free(v);
        return fail(&ps, "trailing characters");
    }
    return v;
}

/* ---- readers ------------------------------------------------------------------- */

const json *json_get(const json *o, const char *key) {
    if (!o || o->type != JSON_OBJECT) return NULL;
    for (size_t i = 0; i < o->count; i++)
        if (strcmp(o->keys[i], key) == 0) return o->items[i];
    return NULL;
}

static bool is_integer_text(const char *t) {
    if (*t == '-') t++;
    if (!*t) return false;
    for (; *t; t++)
        if (*t < '0' || *t > '9') return false;
    return true;
}

bool json_u64(const json *v, uint64_t *out) {
    if (!v || v->type != JSON_NUMBER || !is_integer_text(v->text) || v->text[0] == '-') return false;
    char *end;
    unsigned long long n = strtoull(v->text, &end, 10);
    if (*end || (n == ULLONG_MAX && strcmp(v->text, "18446744073709551615") != 0)) return false;
    *out = (uint64_t)n;
    return true;
}

bool json_i64(const json *v, int64_t *out) {
    if (!v || v->type != JSON_NUMBER || !is_integer_text(v->text)) return false;
    char *end;
    long long n = strtoll(v->text, &end, 10);
    if (*end) return false;
    if ((n == LLONG_MAX && strcmp(v->text, "9223372036854775807") != 0) ||
        (n == LLONG_MIN && strcmp(v->text, "-9223372036854775808") != 0))
        return false;
    *out = (int64_t)n;
    return true;
}

bool json_double(const json *v, double *out) {
    if (!v || v->type != JSON_NUMBER) return false;
    char *end;
    double d = strtod(v->text, &end);
    if (*end) return false;
    *out = d;
    return true;
}

const char *json_string(const json *v) {
    return v && v->type == JSON_STRING ? v->text : NULL;
}

/* ---- builders ------------------------------------------------------------------ */

json *json_new_null(void) { return new_value(JSON_NULL); }

json *json_new_string(const void *bytes, size_t len) {
    json *v = new_value(JSON_STRING);
    v->text = xmalloc(len + 1);
    if (len) memcpy(v->text, bytes, len);
    v->text[len] = '\0';
    v->text_len = len;
    return v;
}

static json *number_text(const char *text) {
    json *v = new_value(JSON_NUMBER);
    v->text_len = strlen(text);
    v->text = xmalloc(v->text_len + 1);
    memcpy(v->text, text, v->text_len + 1);
    return v;
}

json *json_new_u64(uint64_t value) {
    char buf[32];
    snprintf(buf, sizeof buf, "%" PRIu64, value);
    return number_text(buf);
}

json *json_new_i64(int64_t value) {
    char buf[32];
    snprintf(buf, sizeof buf, "%" PRId64, value);
    return number_text(buf);
}

json *json_new_array(void) { return new_value(JSON_ARRAY); }
json *json_new_object(void) { return new_value(JSON_OBJECT); }

void json_push(json *array, json *item) {
    grow(array);
    array->items[array->count++] = item;
}

void json_set(json *object, const char *key, json *item) {
    grow(object);
    size_t n = strlen(key);
    object->keys[object->count] = xmalloc(n + 1);
    memcpy(object->keys[object->count], key, n + 1);
    object->items[object->count++] = item;
}

json *json_clone(const json *v) {
    json *c = new_value(v->type);
    c->boolean = v->boolean;
    if (v->text) {
        c->text = xmalloc(v->text_len + 1);
        memcpy(c->text, v->text, v->text_len + 1);
        c->text_len = v->text_len;
    }
    for (size_t i = 0; i < v->count; i++) {
        if (v->type == JSON_OBJECT) json_set(c, v->keys[i], json_clone(v->items[i]));
        else json_push(c, json_clone(v->items[i]));
    }
    return c;
}

/* ---- equality and dump ---------------------------------------------------------- */

static bool numbers_equal(const char *a, const char *b) {
    bool ia = is_integer_text(a), ib = is_integer_text(b);
    if (ia != ib) return false; /* serde_json: an integer never equals a float */
    if (ia) {
        /* Compare as integers: sign, then digits without leading zeros. */
        bool na = *a == '-', nb = *b == '-';
        a += na;
        b += nb;
        while (*a == '0' && a[1]) a++;
        while (*b == '0' && b[1]) b++;
        if (strcmp(a, "0") == 0 && strcmp(b, "0") == 0) return true;
        return na == nb && strcmp(a, b) == 0;
    }
    return strtod(a, NULL) == strtod(b, NULL);
}

bool json_equal(const json *a, const json *b) {
    if (!a || !b) return a == b;
    if (a->type != b->type) return false;
    switch (a->type) {
    case JSON_NULL: return true;
    case JSON_BOOL: return a->boolean == b->boolean;
    case JSON_NUMBER: return numbers_equal(a->text, b->text);
    case JSON_STRING: return a->text_len == b->text_len && memcmp(a->text, b->text, a->text_len) == 0;
    case JSON_ARRAY:
        if (a->count != b->count) return false;
        for (size_t i = 0; i < a->count; i++)
            if (!json_equal(a->items[i], b->items[i])) return false;
        return true;
    case JSON_OBJECT:
        if (a->count != b->count) return false;
        for (size_t i = 0; i < a->count; i++)
            if (!json_equal(a->items[i], json_get(b, a->keys[i]))) return false;
        return true;
    }
    return false;
}

typedef struct {
    char *buf;
    size_t len, cap;
} strbuf;

static void sb_put(strbuf *sb, const char *s, size_t n) {
    if (sb->len + n + 1 > sb->cap) {
        sb->cap = (sb->len + n + 1) * 2;
        sb->buf = xrealloc(sb->buf, sb->cap);
    }
    memcpy(sb->buf + sb->len, s, n);
    sb->len += n;
    sb->buf[sb->len] = '\0';
}

static void dump_string(strbuf *sb, const char *s, size_t n) {
    sb_put(sb, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        char esc[8];
        if (c == '"' || c == '\\') {
            esc[0] = '\\';
            esc[1] = (char)c;
            sb_put(sb, esc, 2);
        } else if (c < 0x20) {
            snprintf(esc, sizeof esc, "\\u%04x", c);
            sb_put(sb, esc, 6);
        } else {
            sb_put(sb, (const char *)&s[i], 1);
        }
    }
    sb_put(sb, "\"", 1);
}

static void dump(strbuf *sb, const json *v) {
    switch (v->type) {
    case JSON_NULL: sb_put(sb, "null", 4); break;
    case JSON_BOOL: v->boolean ? sb_put(sb, "true", 4) : sb_put(sb, "false", 5); break;
    case JSON_NUMBER: sb_put(sb, v->text, v->text_len); break;
    case JSON_STRING: dump_string(sb, v->text, v->text_len); break;
    case JSON_ARRAY:
    case JSON_OBJECT:
        sb_put(sb, v->type == JSON_ARRAY ? "[" : "{", 1);
        for (size_t i = 0; i < v->count; i++) {
            if (i) sb_put(sb, ",", 1);
            if (v->type == JSON_OBJECT) {
                dump_string(sb, v->keys[i], strlen(v->keys[i]));
                sb_put(sb, ":", 1);
            }
            dump(sb, v->items[i]);
        }
        sb_put(sb, v->type == JSON_ARRAY ? "]" : "}", 1);
        break;
    }
}

char *json_dump(const json *v) {
    strbuf sb = {NULL, 0, 0};
    sb_put(&sb, "", 0);
    if (v) dump(&sb, v);
    else sb_put(&sb, "(none)", 6);
    return sb.buf;
}

char *read_file(const char *path, size_t *out_len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 4096, len = 0;
    char *buf = xmalloc(cap);
    size_t n;
    while ((n = fread(buf + len, 1, cap - len - 1, f)) > 0) {
        len += n;
        if (cap - len - 1 == 0) {
            cap *= 2;
            buf = xrealloc(buf, cap);
        }
    }
    fclose(f);
    buf[len] = '\0';
    *out_len = len;
    return buf;
}
