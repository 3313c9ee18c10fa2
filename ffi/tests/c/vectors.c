/* Replays every conformance vector in tests/vectors/ (and tests/vectors/resp/ through
 * the RESP decoder) through the C ABI, with the checks of core/tests/vectors.rs: the
 * outputs of each step, as JSON, must equal the expected ones; errors by their codes.
 *
 *   vectors <tests/vectors directory>
 */
#include <dirent.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "redlock.h"

static char failure[8192];

static bool fail(const char *format, ...) {
    va_list args;
    va_start(args, format);
    vsnprintf(failure, sizeof failure, format, args);
    va_end(args);
    return false;
}

#define TRY(expr)                                                                        \
    do {                                                                                 \
        if (!(expr)) return false;                                                       \
    } while (0)

/* A call that must succeed: anything else is a failure of the library, not the vector. */
#define MUST(call)                                                                       \
    do {                                                                                 \
        redlock_result must_rc = (call);                                                 \
        if (must_rc != REDLOCK_OK)                                                       \
            return fail("%s:%d: %s gave %s", __FILE__, __LINE__, #call,                  \
                        redlock_result_name(must_rc));                                   \
    } while (0)

/* ---- small helpers ------------------------------------------------------------- */

static bool hex_decode(const char *text, uint8_t **out, size_t *out_len) {
    size_t n = strlen(text);
    if (n % 2) return fail("odd hex length");
    uint8_t *bytes = malloc(n / 2 + 1);
    for (size_t i = 0; i < n / 2; i++) {
        unsigned value;
        if (sscanf(text + 2 * i, "%2x", &value) != 1) {
            free(bytes);
            return fail("bad hex");
        }
        bytes[i] = (uint8_t)value;
    }
    *out = bytes;
    *out_len = n / 2;
    return true;
}

static const char *reason_name(uint32_t reason) {
    switch (reason) {
    case REDLOCK_REASON_CONFLICT: return "conflict";
    case REDLOCK_REASON_NODES_FAILED: return "nodes_failed";
    case REDLOCK_REASON_MIXED: return "mixed";
    case REDLOCK_REASON_VALIDITY_TOO_SHORT: return "validity_too_short";
    case REDLOCK_REASON_NOT_HELD: return "not_held";
    default: return "?";
    }
}

static const char *node_name(uint32_t kind) {
    switch (kind) {
    case REDLOCK_NODE_NOT_ASKED: return "not_asked";
    case REDLOCK_NODE_PENDING: return "pending";
    case REDLOCK_NODE_SUCCESS: return "success";
    case REDLOCK_NODE_CONFLICT: return "conflict";
    case REDLOCK_NODE_ERROR: return "error";
    case REDLOCK_NODE_TIMEOUT: return "timeout";
    case REDLOCK_NODE_MISSING: return "missing";
    default: return "?";
    }
}

static const char *outcome_name(uint32_t kind) {
    switch (kind) {
    case REDLOCK_OUTCOME_ACQUIRED: return "acquired";
    case REDLOCK_OUTCOME_NOT_ACQUIRED: return "not_acquired";
    case REDLOCK_OUTCOME_EXTENDED: return "extended";
    case REDLOCK_OUTCOME_NOT_EXTENDED: return "not_extended";
    case REDLOCK_OUTCOME_RELEASED: return "released";
    case REDLOCK_OUTCOME_NOT_RELEASED: return "not_released";
    case REDLOCK_OUTCOME_INSPECTED: return "inspected";
    case REDLOCK_OUTCOME_NOT_INSPECTED: return "not_inspected";
    default: return "?";
    }
}

static uint32_t reply_kind(const char *type) {
    static const struct {
        const char *name;
        uint32_t kind;
    } kinds[] = {
        {"ok", REDLOCK_REPLY_OK},
        {"status", REDLOCK_REPLY_STATUS},
        {"nil", REDLOCK_REPLY_NIL},
        {"integer", REDLOCK_REPLY_INTEGER},
        {"bulk", REDLOCK_REPLY_BULK},
        {"array", REDLOCK_REPLY_ARRAY},
        {"error", REDLOCK_REPLY_ERROR},
        {"timeout", REDLOCK_REPLY_TIMEOUT},
        {"connection_failed", REDLOCK_REPLY_CONNECTION_FAILED},
    };
    for (size_t i = 0; type && i < sizeof kinds / sizeof kinds[0]; i++)
        if (strcmp(type, kinds[i].name) == 0) return kinds[i].kind;
    return 0;
}

/* ---- configuration ------------------------------------------------------------- */

static bool build_config(const json *c, redlock_result *out_rc, redlock_config **out) {
    uint64_t nodes, ttl_ms, n;
    if (!json_u64(json_get(c, "nodes"), &nodes) || !json_u64(json_get(c, "ttl_ms"), &ttl_ms))
        return fail("config needs integer nodes and ttl_ms");
    redlock_config_builder *b = NULL;
    MUST(redlock_config_builder_new((size_t)nodes, ttl_ms, &b));
    const json *v;
    bool ok = true;
    double factor;
    if ((v = json_get(c, "drift_factor")))
        ok = ok && json_double(v, &factor) &&
             redlock_config_builder_set_drift_factor(b, factor) == REDLOCK_OK;
    if ((v = json_get(c, "drift_fixed_us")))
        ok = ok && json_u64(v, &n) && redlock_config_builder_set_drift_fixed_us(b, n) == REDLOCK_OK;
    if ((v = json_get(c, "node_timeout_us")))
        ok = ok && json_u64(v, &n) && redlock_config_builder_set_node_timeout_us(b, n) == REDLOCK_OK;
    if ((v = json_get(c, "min_validity_us")))
        ok = ok && json_u64(v, &n) && redlock_config_builder_set_min_validity_us(b, n) == REDLOCK_OK;
    if ((v = json_get(c, "attempts")))
        ok = ok && json_u64(v, &n) &&
             redlock_config_builder_set_attempts(b, (uint32_t)n) == REDLOCK_OK;
    if ((v = json_get(c, "retry_delay_us")))
        ok = ok && json_u64(v, &n) && redlock_config_builder_set_retry_delay_us(b, n) == REDLOCK_OK;
    if ((v = json_get(c, "retry_jitter_us")))
        ok = ok && json_u64(v, &n) && redlock_config_builder_set_retry_jitter_us(b, n) == REDLOCK_OK;
    if ((v = json_get(c, "key_prefix")))
        ok = ok && v->type == JSON_STRING &&
             redlock_config_builder_set_key_prefix(b, (const uint8_t *)v->text, v->text_len) ==
                 REDLOCK_OK;
    if ((v = json_get(c, "fencing")))
        ok = ok && v->type == JSON_BOOL &&
             redlock_config_builder_set_fencing(b, v->boolean) == REDLOCK_OK &&
             redlock_config_fencing(NULL) == false;
    if ((v = json_get(c, "token_bytes")))
        ok = ok && json_u64(v, &n) &&
             redlock_config_builder_set_token_bytes(b, (size_t)n) == REDLOCK_OK;
    if (!ok) {
        redlock_config_builder_free(b);
        return fail("a config field has the wrong type");
    }
    *out_rc = redlock_config_builder_build(b, out);
    redlock_config_builder_free(b);
    return true;
}

/* ---- replies ------------------------------------------------------------------- */

/* A reply handle for any JSON reply, arrays included. */
static bool reply_handle(const json *v, redlock_reply **out) {
    uint32_t kind = reply_kind(json_string(json_get(v, "type")));
    if (!kind) return fail("unknown reply type");
    const json *value = json_get(v, "value");
    if (kind == REDLOCK_REPLY_ARRAY) {
        if (!value || value->type != JSON_ARRAY) return fail("array reply needs a list");
        redlock_reply *array = NULL;
        MUST(redlock_reply_new(REDLOCK_REPLY_ARRAY, 0, NULL, 0, &array));
        for (size_t i = 0; i < value->count; i++) {
            redlock_reply *item = NULL;
            if (!reply_handle(value->items[i], &item)) {
                redlock_reply_free(array);
                return false;
            }
            redlock_result rc = redlock_reply_array_push(array, item);
            redlock_reply_free(item);
            if (rc != REDLOCK_OK) {
                redlock_reply_free(array);
                return fail("array push gave %s", redlock_result_name(rc));
            }
        }
        *out = array;
        return true;
    }
    int64_t integer = 0;
    if (kind == REDLOCK_REPLY_INTEGER && !json_i64(value, &integer))
        return fail("integer reply needs an integer");
    const char *text = json_string(value);
    size_t text_len = text ? value->text_len : 0;
    MUST(redlock_reply_new(kind, integer, (const uint8_t *)text, text_len, out));
    return true;
}

/* A reply as the vectors write it (core/tests/vectors.rs reply_to_json). */
static json *reply_to_json(const redlock_reply *reply) {
    static const char *names[] = {"?",     "ok",    "status",  "nil",
                                  "integer", "bulk", "array", "error",
                                  "timeout", "connection_failed"};
    uint32_t kind = redlock_reply_kind(reply);
    json *out = json_new_object();
    json_set(out, "type", json_new_string(names[kind <= 9 ? kind : 0],
                                          strlen(names[kind <= 9 ? kind : 0])));
    const uint8_t *bytes;
    size_t len;
    int64_t integer;
    if (kind == REDLOCK_REPLY_INTEGER && redlock_reply_integer(reply, &integer) == REDLOCK_OK) {
        json_set(out, "value", json_new_i64(integer));
    } else if (kind == REDLOCK_REPLY_ARRAY) {
        json *items = json_new_array();
        size_t count = redlock_reply_array_len(reply);
        for (size_t i = 0; i < count; i++) {
            redlock_reply *item = NULL;
            if (redlock_reply_array_get(reply, i, &item) == REDLOCK_OK) {
                json_push(items, reply_to_json(item));
                redlock_reply_free(item);
            }
        }
        json_set(out, "value", items);
    } else if (redlock_reply_bytes(reply, &bytes, &len) == REDLOCK_OK) {
        json_set(out, "value", json_new_string(bytes, len));
    }
    return out;
}

/* ---- the replay ---------------------------------------------------------------- */

#define MAX_NAMED 256

typedef struct {
    redlock_client *client;
    char *op_names[MAX_NAMED];
    redlock_operation *ops[MAX_NAMED];
    size_t op_count;
    char *lease_names[MAX_NAMED];
    redlock_lease *leases[MAX_NAMED];
    size_t lease_count;
    /* The last outcome each operation handed out (for `keepalive_outcome`). */
    char *outcome_names[MAX_NAMED];
    redlock_outcome *outcomes[MAX_NAMED];
    size_t outcome_count;
    char *keepalive_names[MAX_NAMED];
    redlock_keepalive *keepalives[MAX_NAMED];
    size_t keepalive_count;
    const char *last;
} replay;

static char *dup_text(const char *text) {
    size_t n = strlen(text) + 1;
    char *copy = malloc(n);
    memcpy(copy, text, n);
    return copy;
}

static redlock_operation *find_op(replay *r, const char *name) {
    for (size_t i = 0; i < r->op_count; i++)
        if (strcmp(r->op_names[i], name) == 0) return r->ops[i];
    return NULL;
}

/* Stores `op` under `name`, freeing an operation the name held before. */
static bool put_op(replay *r, const char *name, redlock_operation *op) {
    for (size_t i = 0; i < r->op_count; i++)
        if (strcmp(r->op_names[i], name) == 0) {
            redlock_operation_free(r->ops[i]);
            r->ops[i] = op;
            r->last = r->op_names[i];
            return true;
        }
    if (r->op_count == MAX_NAMED) return fail("too many operations");
    r->op_names[r->op_count] = dup_text(name);
    r->ops[r->op_count] = op;
    r->last = r->op_names[r->op_count++];
    return true;
}

static redlock_lease *find_lease(replay *r, const char *name) {
    for (size_t i = 0; i < r->lease_count; i++)
        if (strcmp(r->lease_names[i], name) == 0) return r->leases[i];
    return NULL;
}

static bool put_lease(replay *r, const char *name, redlock_lease *lease) {
    for (size_t i = 0; i < r->lease_count; i++)
        if (strcmp(r->lease_names[i], name) == 0) {
            redlock_lease_free(r->leases[i]);
            r->leases[i] = lease;
            return true;
        }
    if (r->lease_count == MAX_NAMED) return fail("too many leases");
    r->lease_names[r->lease_count] = dup_text(name);
    r->leases[r->lease_count++] = lease;
    return true;
}

static redlock_outcome *find_outcome(replay *r, const char *name) {
    for (size_t i = 0; i < r->outcome_count; i++)
        if (strcmp(r->outcome_names[i], name) == 0) return r->outcomes[i];
    return NULL;
}

/* Keeps `outcome` as operation `name`'s last, freeing the one it replaces. */
static bool put_outcome(replay *r, const char *name, redlock_outcome *outcome) {
    for (size_t i = 0; i < r->outcome_count; i++)
        if (strcmp(r->outcome_names[i], name) == 0) {
            redlock_outcome_free(r->outcomes[i]);
            r->outcomes[i] = outcome;
            return true;
        }
    if (r->outcome_count == MAX_NAMED) {
        redlock_outcome_free(outcome);
        return fail("too many outcomes");
    }
    r->outcome_names[r->outcome_count] = dup_text(name);
    r->outcomes[r->outcome_count++] = outcome;
    return true;
}

static redlock_keepalive *find_keepalive(replay *r, const char *name) {
    for (size_t i = 0; i < r->keepalive_count; i++)
        if (strcmp(r->keepalive_names[i], name) == 0) return r->keepalives[i];
    return NULL;
}

static bool put_keepalive(replay *r, const char *name, redlock_keepalive *keepalive) {
    for (size_t i = 0; i < r->keepalive_count; i++)
        if (strcmp(r->keepalive_names[i], name) == 0) {
            redlock_keepalive_free(r->keepalives[i]);
            r->keepalives[i] = keepalive;
            return true;
        }
    if (r->keepalive_count == MAX_NAMED) {
        redlock_keepalive_free(keepalive);
        return fail("too many keep-alives");
    }
    r->keepalive_names[r->keepalive_count] = dup_text(name);
    r->keepalives[r->keepalive_count++] = keepalive;
    return true;
}

static void replay_free(replay *r) {
    for (size_t i = 0; i < r->outcome_count; i++) {
        redlock_outcome_free(r->outcomes[i]);
        free(r->outcome_names[i]);
    }
    for (size_t i = 0; i < r->keepalive_count; i++) {
        redlock_keepalive_free(r->keepalives[i]);
        free(r->keepalive_names[i]);
    }
    for (size_t i = 0; i < r->op_count; i++) {
        redlock_operation_free(r->ops[i]);
        free(r->op_names[i]);
    }
    for (size_t i = 0; i < r->lease_count; i++) {
        redlock_lease_free(r->leases[i]);
        free(r->lease_names[i]);
    }
    redlock_client_free(r->client);
}

static json *nodes_to_json(const redlock_outcome *outcome) {
    json *nodes = json_new_array();
    size_t count = redlock_outcome_node_count(outcome);
    for (size_t i = 0; i < count; i++) {
        uint32_t kind = 0;
        const uint8_t *text;
        size_t len;
        if (redlock_outcome_node(outcome, i, &kind, &text, &len) != REDLOCK_OK) kind = 0;
        if (kind == REDLOCK_NODE_ERROR) {
            json *error = json_new_object();
            json_set(error, "error", json_new_string(text, len));
            json_push(nodes, error);
        } else {
            json_push(nodes, json_new_string(node_name(kind), strlen(node_name(kind))));
        }
    }
    return nodes;
}

/* The outcome as the vectors write it; NULL (with `failure` set) if an accessor that
 * must work for this kind does not. */
static json *outcome_to_json(const redlock_outcome *o) {
    uint32_t kind = redlock_outcome_kind(o);
    json *out = json_new_object();
    json_set(out, "kind", json_new_string(outcome_name(kind), strlen(outcome_name(kind))));
    const uint8_t *token;
    size_t token_len;
    uint64_t valid_until, validity, at;
    uint32_t attempts, extensions, reason;
    size_t released;
    bool due, lost;
    bool ok = true;
    bool has_lease = kind == REDLOCK_OUTCOME_ACQUIRED || kind == REDLOCK_OUTCOME_EXTENDED ||
                     kind == REDLOCK_OUTCOME_NOT_EXTENDED;
    bool failed = kind == REDLOCK_OUTCOME_NOT_ACQUIRED || kind == REDLOCK_OUTCOME_NOT_EXTENDED;
    if (failed) {
        ok = ok && redlock_outcome_reason(o, &reason) == REDLOCK_OK;
        if (ok) json_set(out, "reason", json_new_string(reason_name(reason), strlen(reason_name(reason))));
    } else {
        ok = ok && redlock_outcome_reason(o, &reason) == REDLOCK_NO_VALUE;
    }
    if (kind == REDLOCK_OUTCOME_ACQUIRED || kind == REDLOCK_OUTCOME_NOT_ACQUIRED ||
        kind == REDLOCK_OUTCOME_EXTENDED) {
        ok = ok && redlock_outcome_token(o, &token, &token_len) == REDLOCK_OK;
        if (ok) json_set(out, "token", json_new_string(token, token_len));
    }
    uint64_t fencing_token = 0;
    if (kind == REDLOCK_OUTCOME_ACQUIRED &&
        redlock_outcome_fencing_token(o, &fencing_token) == REDLOCK_OK) {
        /* The lease carries the same token. */
        redlock_lease *lease = NULL;
        uint64_t lease_token = 0;
        ok = ok && redlock_outcome_lease(o, &lease) == REDLOCK_OK &&
             redlock_lease_fencing_token(lease, &lease_token) == REDLOCK_OK &&
             lease_token == fencing_token;
        redlock_lease_free(lease);
        if (ok) json_set(out, "fencing_token", json_new_u64(fencing_token));
    }
    if (has_lease) {
        ok = ok && redlock_outcome_valid_until(o, &valid_until) == REDLOCK_OK &&
             redlock_outcome_validity(o, &validity) == REDLOCK_OK &&
             redlock_outcome_extensions(o, &extensions) == REDLOCK_OK;
        if (ok) {
            json_set(out, "valid_until", json_new_u64(valid_until));
            json_set(out, "validity", json_new_u64(validity));
        }
    } else {
        ok = ok && redlock_outcome_valid_until(o, &valid_until) == REDLOCK_NO_VALUE &&
             redlock_outcome_validity(o, &validity) == REDLOCK_NO_VALUE;
    }
    if (kind == REDLOCK_OUTCOME_ACQUIRED || kind == REDLOCK_OUTCOME_NOT_ACQUIRED) {
        ok = ok && redlock_outcome_attempts(o, &attempts) == REDLOCK_OK;
        if (ok) json_set(out, "attempts", json_new_u64(attempts));
    } else {
        ok = ok && redlock_outcome_attempts(o, &attempts) == REDLOCK_NO_VALUE;
    }
    if (kind == REDLOCK_OUTCOME_EXTENDED && ok) json_set(out, "extensions", json_new_u64(extensions));
    if (kind == REDLOCK_OUTCOME_NOT_EXTENDED) {
        ok = ok && redlock_outcome_retry_at(o, &due, &at) == REDLOCK_OK &&
             redlock_outcome_is_lost(o, &lost) == REDLOCK_OK;
        if (ok) json_set(out, "retry_at", due ? json_new_u64(at) : json_new_null());
    } else {
        ok = ok && redlock_outcome_retry_at(o, &due, &at) == REDLOCK_NO_VALUE &&
             redlock_outcome_is_lost(o, &lost) == REDLOCK_NO_VALUE;
    }
    if (kind == REDLOCK_OUTCOME_RELEASED || kind == REDLOCK_OUTCOME_NOT_RELEASED) {
        ok = ok && redlock_outcome_released(o, &released) == REDLOCK_OK &&
             redlock_outcome_token(o, &token, &token_len) == REDLOCK_NO_VALUE;
        if (ok) json_set(out, "released", json_new_u64(released));
    } else {
        ok = ok && redlock_outcome_released(o, &released) == REDLOCK_NO_VALUE;
    }
    if (kind == REDLOCK_OUTCOME_INSPECTED) {
        const uint8_t *holder = NULL;
        size_t holder_len = 0;
        redlock_result held = redlock_outcome_holder(o, &holder, &holder_len);
        ok = ok && (held == REDLOCK_OK || held == REDLOCK_NO_VALUE) &&
             redlock_outcome_is_locked(o) == (held == REDLOCK_OK);
        if (ok)
            json_set(out, "holder",
                     held == REDLOCK_OK ? json_new_string((const char *)holder, holder_len)
                                        : json_new_null());
    } else {
        const uint8_t *holder = NULL;
        size_t holder_len = 0;
        ok = ok && redlock_outcome_holder(o, &holder, &holder_len) == REDLOCK_NO_VALUE &&
             !redlock_outcome_is_locked(o);
    }
    ok = ok && redlock_outcome_is_success(o) ==
                   (kind == REDLOCK_OUTCOME_ACQUIRED || kind == REDLOCK_OUTCOME_EXTENDED ||
                    kind == REDLOCK_OUTCOME_RELEASED || kind == REDLOCK_OUTCOME_INSPECTED);
    /* A failure has exactly one error class, a success none; each failed node a cause. */
    uint32_t error_class = redlock_outcome_error_class(o);
    ok = ok && (error_class == 0) == redlock_outcome_is_success(o) &&
         (error_class == 0 || redlock_error_class_name(error_class) != NULL);
    for (size_t i = 0; ok && i < redlock_outcome_node_count(o); i++) {
        uint32_t node_kind = 0, cause = 99;
        const uint8_t *text;
        size_t len;
        ok = redlock_outcome_node(o, i, &node_kind, &text, &len) == REDLOCK_OK &&
             redlock_outcome_node_cause(o, i, &cause) == REDLOCK_OK &&
             (cause != 0) == (node_kind == REDLOCK_NODE_ERROR || node_kind == REDLOCK_NODE_TIMEOUT) &&
             (cause == 0 || redlock_node_cause_name(cause) != NULL);
    }
    ok = ok && redlock_outcome_node_cause(o, redlock_outcome_node_count(o), &reason) ==
                   REDLOCK_OUT_OF_RANGE;
    if (!ok) {
        json_free(out);
        fail("an outcome accessor disagrees with the outcome's kind (%s)", outcome_name(kind));
        return NULL;
    }
    json_set(out, "nodes", nodes_to_json(o));
    return out;
}

/* The RESP encoding of `argc` arguments, to check redlock_operation_command_resp. */
static char *encode_resp(const uint8_t *const *args, const size_t *lens, size_t argc, size_t *out_len) {
    size_t cap = 32;
    for (size_t i = 0; i < argc; i++) cap += lens[i] + 32;
    char *buf = malloc(cap);
    size_t n = (size_t)snprintf(buf, cap, "*%zu\r\n", argc);
    for (size_t i = 0; i < argc; i++) {
        n += (size_t)snprintf(buf + n, cap - n, "$%zu\r\n", lens[i]);
        memcpy(buf + n, args[i], lens[i]);
        n += lens[i];
        memcpy(buf + n, "\r\n", 2);
        n += 2;
    }
    *out_len = n;
    return buf;
}

static bool send_to_json(redlock_operation *op, json **out) {
    size_t node, argc;
    uint64_t request, deadline;
    MUST(redlock_operation_command(op, &node, &request, &deadline, &argc));
    uint32_t command_kind;
    bool is_eval;
    MUST(redlock_operation_command_kind(op, &command_kind, &is_eval));
    const uint8_t **args = malloc((argc + 1) * sizeof *args);
    size_t *lens = malloc((argc + 1) * sizeof *lens);
    size_t got = 0;
    bool ok = argc > 0 && redlock_operation_command_args(op, args, lens, argc - 1, &got) ==
                              REDLOCK_BUFFER_TOO_SMALL &&
              redlock_operation_command_args(op, args, lens, argc + 1, &got) == REDLOCK_OK &&
              got == argc;
    json *argv = json_new_array();
    for (size_t i = 0; ok && i < argc; i++) {
        const uint8_t *arg;
        size_t len;
        ok = redlock_operation_command_arg(op, i, &arg, &len) == REDLOCK_OK && arg == args[i] &&
             len == lens[i];
        json_push(argv, json_new_string(args[i], lens[i]));
    }
    const uint8_t *resp, *tail;
    size_t resp_len, tail_len, expected_len = 0;
    ok = ok && redlock_operation_command_arg(op, argc, &tail, &tail_len) == REDLOCK_OUT_OF_RANGE &&
         redlock_operation_command_resp(op, &resp, &resp_len) == REDLOCK_OK;
    if (ok) {
        char *expected = encode_resp(args, lens, argc, &expected_len);
        ok = expected_len == resp_len && memcmp(expected, resp, resp_len) == 0;
        free(expected);
    }
    /* EVAL carries the script; EVALSHA and SET do not. */
    ok = ok && is_eval == (lens[0] == 4 && memcmp(args[0], "EVAL", 4) == 0);
    free(args);
    free(lens);
    if (!ok) {
        json_free(argv);
        return fail("the command's accessors disagree with each other");
    }
    json *send = json_new_object();
    json_set(send, "node", json_new_u64(node));
    json_set(send, "request", json_new_u64(request));
    json_set(send, "deadline", json_new_u64(deadline));
    json_set(send, "argv", argv);
    *out = json_new_object();
    json_set(*out, "send", send);
    return true;
}

/* Polls `op` until it has nothing more, as JSON outputs. */
static bool drain(replay *r, const char *name, redlock_operation *op, json **out) {
    json *outputs = json_new_array();
    for (;;) {
        uint32_t kind;
        redlock_result rc = redlock_operation_poll_output(op, &kind);
        if (rc != REDLOCK_OK) {
            json_free(outputs);
            return fail("poll gave %s", redlock_result_name(rc));
        }
        if (kind == REDLOCK_OUTPUT_NONE) break;
        json *output = NULL;
        if (kind == REDLOCK_OUTPUT_SEND) {
            if (!send_to_json(op, &output)) {
                json_free(outputs);
                return false;
            }
        } else if (kind == REDLOCK_OUTPUT_WAIT) {
            uint64_t until;
            redlock_outcome *none = NULL;
            if (redlock_operation_wait_until(op, &until) != REDLOCK_OK ||
                redlock_operation_take_outcome(op, &none) != REDLOCK_NO_VALUE) {
                json_free(outputs);
                return fail("wait accessors");
            }
            output = json_new_object();
            json_set(output, "wait", json_new_u64(until));
        } else if (kind == REDLOCK_OUTPUT_OUTCOME) {
            redlock_outcome *outcome = NULL, *again = NULL;
            uint64_t until;
            if (redlock_operation_take_outcome(op, &outcome) != REDLOCK_OK ||
                redlock_operation_take_outcome(op, &again) != REDLOCK_NO_VALUE ||
                redlock_operation_wait_until(op, &until) != REDLOCK_NO_VALUE) {
                redlock_outcome_free(outcome);
                json_free(outputs);
                return fail("outcome accessors");
            }
            json *value = outcome_to_json(outcome);
            redlock_lease *lease = NULL;
            redlock_result lease_rc = redlock_outcome_lease(outcome, &lease);
            /* Kept (and freed with the replay) for `keepalive_outcome` steps. */
            if (!put_outcome(r, name, outcome)) {
                redlock_lease_free(lease);
                json_free(value);
                json_free(outputs);
                return false;
            }
            if (!value) {
                redlock_lease_free(lease);
                json_free(outputs);
                return false;
            }
            if (lease_rc == REDLOCK_OK && !put_lease(r, name, lease)) {
                redlock_lease_free(lease);
                json_free(value);
                json_free(outputs);
                return false;
            }
            output = json_new_object();
            json_set(output, "outcome", value);
        } else {
            json_free(outputs);
            return fail("unknown output kind %u", kind);
        }
        json_push(outputs, output);
        if (outputs->count > 10000) {
            json_free(outputs);
            return fail("outputs never end");
        }
    }
    *out = outputs;
    return true;
}

/* Resource names of a step as arrays for the C ABI (pointing into the JSON). */
static bool resources_of(const json *list, const uint8_t ***ptrs, size_t **lens, size_t *count) {
    if (!list || list->type != JSON_ARRAY) return fail("resources must be a list");
    *ptrs = malloc((list->count + 1) * sizeof **ptrs);
    *lens = malloc((list->count + 1) * sizeof **lens);
    for (size_t i = 0; i < list->count; i++) {
        if (list->items[i]->type != JSON_STRING) {
            free(*ptrs);
            free(*lens);
            return fail("resource must be a string");
        }
        (*ptrs)[i] = (const uint8_t *)list->items[i]->text;
        (*lens)[i] = list->items[i]->text_len;
    }
    *count = list->count;
    return true;
}

/* A keep-alive step (`keepalive`, `keepalive_outcome`, `keepalive_failure`,
 * `keepalive_stop`, `keepalive_poll`): its input, then one poll at `now`; `*outputs` is
 * `[<action>, {"valid_until": <us>}]`. The keep-alive's lease afterwards is kept under
 * its name, for extensions of it (core/tests/vectors.rs keepalive_step). Returns false
 * with `*handled` unset for a step of another kind. */
static bool keepalive_step(replay *r, const json *s, uint64_t now, bool *handled,
                           json **outputs) {
    *handled = false;
    const char *name = json_string(json_get(s, "name"));
    const json *args;
    if (!name) return true;
    if ((args = json_get(s, "keepalive"))) {
        const char *lease_name = json_string(json_get(args, "lease"));
        redlock_lease *lease = lease_name ? find_lease(r, lease_name) : NULL;
        if (!lease) return fail("no lease named %s", lease_name ? lease_name : "(none)");
        redlock_keepalive *keepalive = NULL;
        MUST(redlock_keepalive_new(r->client, lease, &keepalive));
        TRY(put_keepalive(r, name, keepalive));
    } else if ((args = json_get(s, "keepalive_outcome"))) {
        const char *op = json_string(json_get(args, "op"));
        if (!op) return fail("keepalive_outcome needs op");
        redlock_outcome *outcome = find_outcome(r, op);
        if (!outcome) return fail("no outcome of %s", op);
        redlock_keepalive *keepalive = find_keepalive(r, name);
        if (!keepalive) return fail("no keep-alive named %s", name);
        MUST(redlock_keepalive_handle_outcome(keepalive, outcome, now));
    } else if (json_get(s, "keepalive_failure")) {
        redlock_keepalive *keepalive = find_keepalive(r, name);
        if (!keepalive) return fail("no keep-alive named %s", name);
        MUST(redlock_keepalive_handle_failure(keepalive, now));
    } else if (json_get(s, "keepalive_stop")) {
        redlock_keepalive *keepalive = find_keepalive(r, name);
        if (!keepalive) return fail("no keep-alive named %s", name);
        MUST(redlock_keepalive_stop(keepalive));
    } else if (!json_get(s, "keepalive_poll")) {
        return true;
    }
    *handled = true;
    redlock_keepalive *keepalive = find_keepalive(r, name);
    if (!keepalive) return fail("no keep-alive named %s", name);
    uint32_t action = 0, reason = 0;
    uint64_t until = 0;
    MUST(redlock_keepalive_poll(keepalive, now, &action, &until, &reason));
    json *out = json_new_object();
    switch (action) {
    case REDLOCK_KEEPALIVE_EXTEND:
        json_set(out, "extend", json_new_object());
        break;
    case REDLOCK_KEEPALIVE_WAIT:
        json_set(out, "wait", json_new_u64(until));
        break;
    case REDLOCK_KEEPALIVE_LOST: {
        const char *text = redlock_lost_reason_name(reason);
        /* The reason the poll gave is the keep-alive's own. */
        if (!text || redlock_keepalive_lost_reason(keepalive) != reason) {
            json_free(out);
            return fail("lost reason %u has no name or disagrees with the keep-alive's", reason);
        }
        json_set(out, "lost", json_new_string(text, strlen(text)));
        break;
    }
    case REDLOCK_KEEPALIVE_STOPPED:
        json_set(out, "stopped", json_new_object());
        break;
    default:
        json_free(out);
        return fail("unknown keep-alive action %u", action);
    }
    redlock_lease *lease = NULL;
    redlock_result rc = redlock_keepalive_lease(keepalive, &lease);
    if (rc != REDLOCK_OK) {
        json_free(out);
        return fail("redlock_keepalive_lease gave %s", redlock_result_name(rc));
    }
    json *valid_until = json_new_object();
    json_set(valid_until, "valid_until", json_new_u64(redlock_lease_valid_until(lease)));
    if (!put_lease(r, name, lease)) {
        redlock_lease_free(lease);
        json_free(out);
        json_free(valid_until);
        return false;
    }
    *outputs = json_new_array();
    json_push(*outputs, out);
    json_push(*outputs, valid_until);
    return true;
}

/* Runs one step: `*error` is the usage error's code or NULL; `*outputs` what followed. */
static bool step(replay *r, const json *s, const char **error, json **outputs) {
    uint64_t now = 0;
    const json *now_value = json_get(s, "now");
    if (now_value && !json_u64(now_value, &now)) return fail("now must be an integer");
    const char *op_name = json_string(json_get(s, "op"));
    const json *args;
    *error = NULL;
    *outputs = NULL;
    redlock_result rc = REDLOCK_OK;
    redlock_operation *op = NULL;
    const char *target;
    bool handled;

    TRY(keepalive_step(r, s, now, &handled, outputs));
    if (handled) return true;
    if ((args = json_get(s, "acquire"))) {
        if (!op_name) return fail("acquire needs op");
        const char *hex = json_string(json_get(args, "random"));
        if (!hex) return fail("acquire needs random");
        uint8_t *random;
        size_t random_len;
        TRY(hex_decode(hex, &random, &random_len));
        const uint8_t **ptrs;
        size_t *lens, count;
        if (!resources_of(json_get(args, "resources"), &ptrs, &lens, &count)) {
            free(random);
            return false;
        }
        const json *wait_ms = json_get(args, "wait_ms");
        uint64_t wait = 0;
        if (wait_ms && !json_u64(wait_ms, &wait)) {
            free(random);
            free(ptrs);
            free(lens);
            return fail("wait_ms must be an integer");
        }
        if (wait_ms)
            rc = redlock_client_acquire_with_random_options(r->client, ptrs, lens, count, 0, true,
                                                            wait * 1000, random, random_len, now,
                                                            &op);
        else
            rc = redlock_client_acquire_with_random(r->client, ptrs, lens, count, random,
                                                    random_len, now, &op);
        free(random);
        free(ptrs);
        free(lens);
        if (rc != REDLOCK_OK) {
            *error = redlock_result_name(rc);
            *outputs = json_new_array();
            return true;
        }
        TRY(put_op(r, op_name, op));
        target = op_name;
    } else if ((args = json_get(s, "inspect"))) {
        if (!op_name) return fail("inspect needs op");
        const uint8_t **ptrs;
        size_t *lens, count;
        TRY(resources_of(json_get(args, "resources"), &ptrs, &lens, &count));
        rc = redlock_client_inspect(r->client, ptrs, lens, count, now, &op);
        free(ptrs);
        free(lens);
        if (rc != REDLOCK_OK) {
            *error = redlock_result_name(rc);
            *outputs = json_new_array();
            return true;
        }
        TRY(put_op(r, op_name, op));
        target = op_name;
    } else if ((args = json_get(s, "extend")) || (args = json_get(s, "release"))) {
        if (!op_name) return fail("extend/release needs op");
        const char *lease_name = json_string(json_get(args, "lease"));
        redlock_lease *lease = lease_name ? find_lease(r, lease_name) : NULL;
        if (!lease) return fail("no lease named %s", lease_name ? lease_name : "(none)");
        if (json_get(s, "extend")) {
            uint64_t ttl_ms;
            if (json_get(args, "ttl_ms")) {
                if (!json_u64(json_get(args, "ttl_ms"), &ttl_ms)) return fail("ttl_ms must be an integer");
                rc = redlock_client_extend_for(r->client, lease, ttl_ms, now, &op);
            } else {
                rc = redlock_client_extend(r->client, lease, now, &op);
            }
            if (rc != REDLOCK_OK) {
                *error = redlock_result_name(rc);
                *outputs = json_new_array();
                return true;
            }
        } else {
            MUST(redlock_client_release(r->client, lease, now, &op));
        }
        TRY(put_op(r, op_name, op));
        target = op_name;
    } else if ((args = json_get(s, "lease"))) {
        const char *name = json_string(json_get(s, "name"));
        const char *token = json_string(json_get(args, "token"));
        uint64_t valid_until = 0;
        json_u64(json_get(args, "valid_until"), &valid_until);
        if (!name || !token) return fail("lease needs name and token");
        const uint8_t **ptrs;
        size_t *lens, count;
        TRY(resources_of(json_get(args, "resources"), &ptrs, &lens, &count));
        redlock_lease *lease = NULL;
        rc = redlock_client_lease(r->client, ptrs, lens, count, (const uint8_t *)token,
                                  json_get(args, "token")->text_len, valid_until, &lease);
        free(ptrs);
        free(lens);
        *outputs = json_new_array();
        if (rc != REDLOCK_OK) {
            *error = redlock_result_name(rc);
            return true;
        }
        return put_lease(r, name, lease);
    } else if ((args = json_get(s, "reply"))) {
        target = op_name ? op_name : r->last;
        if (!target) return fail("reply before any operation");
        op = find_op(r, target);
        if (!op) return fail("no operation %s", target);
        uint64_t request;
        if (!json_u64(json_get(args, "request"), &request)) return fail("reply needs request");
        const json *value = json_get(args, "value");
        uint32_t kind = reply_kind(json_string(json_get(value, "type")));
        if (!kind) return fail("unknown reply type");
        if (kind == REDLOCK_REPLY_ARRAY) {
            /* Arrays go in as values; so does every other reply on odd request ids,
             * so both entry points are replayed. */
            redlock_reply *reply = NULL;
            TRY(reply_handle(value, &reply));
            rc = redlock_operation_handle_reply_value(op, request, reply, now);
            redlock_reply_free(reply);
        } else if (request % 2) {
            redlock_reply *reply = NULL;
            TRY(reply_handle(value, &reply));
            rc = redlock_operation_handle_reply_value(op, request, reply, now);
            redlock_reply_free(reply);
        } else {
            int64_t integer = 0;
            const json *v = json_get(value, "value");
            if (kind == REDLOCK_REPLY_INTEGER && !json_i64(v, &integer))
                return fail("integer reply needs an integer");
            const char *text = json_string(v);
            rc = redlock_operation_handle_reply(op, request, kind, integer, (const uint8_t *)text,
                                                text ? v->text_len : 0, now);
        }
    } else if (json_get(s, "timeout")) {
        target = op_name ? op_name : r->last;
        if (!target) return fail("timeout before any operation");
        op = find_op(r, target);
        if (!op) return fail("no operation %s", target);
        rc = redlock_operation_handle_timeout(op, now);
    } else if ((args = json_get(s, "notice"))) {
        target = op_name ? op_name : r->last;
        if (!target) return fail("notice before any operation");
        op = find_op(r, target);
        if (!op) return fail("no operation %s", target);
        uint64_t node;
        if (!json_u64(json_get(args, "node"), &node)) return fail("notice needs node");
        /* Every channel the acquisition names is one of its keys' under the core's
           prefixes: the notice channels, then (a waiter) its waiter channels. */
        for (size_t i = 0; i < redlock_operation_notice_channel_count(op); i++) {
            char channel[512];
            size_t len = 0;
            if (redlock_operation_notice_channel(op, i, (uint8_t *)channel, sizeof channel, &len) !=
                    REDLOCK_OK ||
                !((len > 17 && memcmp(channel, "redlock:released:", 17) == 0) ||
                  (len > 32 && memcmp(channel, "redlock:waiter:", 15) == 0 && channel[31] == ':')))
                return fail("notice channel %zu is neither a release nor a waiter channel", i);
        }
        /* `message`: the text the notice carried; without it, the bare notice. */
        const char *message = json_string(json_get(args, "message"));
        rc = message ? redlock_operation_handle_notice_message(
                           op, (size_t)node, (const uint8_t *)message, strlen(message), now)
                     : redlock_operation_handle_notice(op, (size_t)node, now);
    } else if ((args = json_get(s, "subscribed"))) {
        target = op_name ? op_name : r->last;
        if (!target) return fail("subscribed before any operation");
        op = find_op(r, target);
        if (!op) return fail("no operation %s", target);
        uint64_t node;
        if (!json_u64(json_get(args, "node"), &node)) return fail("subscribed needs node");
        rc = redlock_operation_handle_subscribed(op, (size_t)node, now);
    } else if (json_get(s, "abandon")) {
        target = op_name ? op_name : r->last;
        if (!target) return fail("abandon before any operation");
        op = find_op(r, target);
        if (!op) return fail("no operation %s", target);
        rc = redlock_operation_abandon(op, now);
    } else {
        return fail("unknown step");
    }
    if (rc != REDLOCK_OK) *error = redlock_result_name(rc);
    if (!drain(r, target, op, outputs)) return false;
    /* "listens": what redlock_operation_listens says once the outputs are polled. */
    const json *listens = json_get(s, "listens");
    if (listens) {
        if (listens->type != JSON_BOOL) return fail("listens must be true or false");
        bool actual = redlock_operation_listens(op);
        if (actual != listens->boolean)
            return fail("listens %s, expected %s", actual ? "true" : "false",
                        listens->boolean ? "true" : "false");
    }
    return true;
}

/* Replaces the script placeholders of `argv` strings by the scripts' texts. */
static void expand_placeholders(json *v) {
    if (v->type == JSON_STRING) {
        const char *text = NULL;
        if (strcmp(v->text, "{{ACQUIRE_SCRIPT}}") == 0) text = redlock_script_text(REDLOCK_SCRIPT_ACQUIRE);
        if (strcmp(v->text, "{{RELEASE_SCRIPT}}") == 0) text = redlock_script_text(REDLOCK_SCRIPT_RELEASE);
        if (strcmp(v->text, "{{EXTEND_SCRIPT}}") == 0) text = redlock_script_text(REDLOCK_SCRIPT_EXTEND);
        if (text) {
            free(v->text);
            v->text_len = strlen(text);
            v->text = malloc(v->text_len + 1);
            memcpy(v->text, text, v->text_len + 1);
        }
    }
    for (size_t i = 0; i < v->count; i++) expand_placeholders(v->items[i]);
}

static bool run_steps(replay *r, const json *steps) {
    for (size_t i = 0; i < steps->count; i++) {
        const json *s = steps->items[i];
        const char *error = NULL;
        json *outputs = NULL;
        if (!step(r, s, &error, &outputs)) {
            json_free(outputs);
            char inner[sizeof failure];
            memcpy(inner, failure, sizeof inner);
            return fail("step %zu: %s", i, inner);
        }
        const char *expected_error = json_string(json_get(s, "error"));
        if ((error == NULL) != (expected_error == NULL) ||
            (error && strcmp(error, expected_error) != 0)) {
            json_free(outputs);
            return fail("step %zu: error %s, expected %s", i, error ? error : "none",
                        expected_error ? expected_error : "none");
        }
        if (json_get(s, "lease")) {
            json_free(outputs);
            continue;
        }
        const json *expect = json_get(s, "expect");
        if (!expect) {
            json_free(outputs);
            return fail("step %zu: missing expect", i);
        }
        json *expected = json_clone(expect);
        expand_placeholders(expected);
        bool same = json_equal(expected, outputs);
        if (!same) {
            char *a = json_dump(expected), *b = json_dump(outputs);
            fail("step %zu: outputs differ\n  expected: %.3000s\n  actual:   %.3000s", i, a, b);
            free(a);
            free(b);
        }
        json_free(expected);
        json_free(outputs);
        if (!same) return false;
    }
    return true;
}

static bool run_vector(const char *path, const char *stem) {
    size_t len;
    char *text = read_file(path, &len);
    if (!text) return fail("cannot read");
    char error[128] = "";
    json *vector = json_parse(text, len, error, sizeof error);
    free(text);
    if (!vector) return fail("invalid JSON: %s", error);
    bool ok = false;
    const char *name = json_string(json_get(vector, "name"));
    const char *description = json_string(json_get(vector, "description"));
    const char *why = json_string(json_get(vector, "why"));
    redlock_config *config = NULL;
    redlock_result rc = REDLOCK_OK;
    const json *config_error = json_get(vector, "config_error");
    const json *steps = json_get(vector, "steps");
    if (!name || strcmp(name, stem) != 0) {
        fail("name does not match the file name");
    } else if (!description || !*description || !why || !*why) {
        fail("missing description or why");
    } else if (!build_config(json_get(vector, "config"), &rc, &config)) {
        /* failure set */
    } else if (config_error) {
        const char *expected = json_string(config_error);
        if (!expected) fail("config_error must be a string");
        else if (rc == REDLOCK_OK) fail("config accepted, expected %s", expected);
        else if (strcmp(redlock_result_name(rc), expected) != 0)
            fail("config error %s, expected %s", redlock_result_name(rc), expected);
        else ok = true;
    } else if (rc != REDLOCK_OK) {
        fail("config rejected: %s", redlock_result_name(rc));
    } else if (!steps || steps->type != JSON_ARRAY) {
        fail("missing steps");
    } else {
        replay r;
        memset(&r, 0, sizeof r);
        static const uint8_t seed[REDLOCK_SEED_LEN] = {0};
        if (redlock_client_new_seeded(config, seed, sizeof seed, &r.client) != REDLOCK_OK) {
            fail("client");
        } else {
            ok = run_steps(&r, steps);
        }
        replay_free(&r);
    }
    redlock_config_free(config);
    json_free(vector);
    return ok;
}

static bool run_resp_vector(const char *path) {
    size_t len;
    char *text = read_file(path, &len);
    if (!text) return fail("cannot read");
    char error[128] = "";
    json *vector = json_parse(text, len, error, sizeof error);
    free(text);
    if (!vector) return fail("invalid JSON: %s", error);
    const json *chunks = json_get(vector, "chunks");
    if (!chunks || chunks->type != JSON_ARRAY) {
        json_free(vector);
        return fail("missing chunks");
    }
    redlock_decoder *decoder = NULL;
    if (redlock_decoder_new(&decoder) != REDLOCK_OK) {
        json_free(vector);
        return fail("decoder");
    }
    json *replies = json_new_array();
    const char *error_code = NULL;
    bool ok = true;
    for (size_t i = 0; ok && !error_code && i < chunks->count; i++) {
        uint8_t *bytes;
        size_t n;
        const char *hex = json_string(chunks->items[i]);
        if (!hex || !hex_decode(hex, &bytes, &n)) {
            ok = fail("chunk must be hex");
            break;
        }
        redlock_result rc = redlock_decoder_feed(decoder, bytes, n);
        free(bytes);
        if (rc != REDLOCK_OK) {
            ok = fail("feed gave %s", redlock_result_name(rc));
            break;
        }
        for (;;) {
            redlock_reply *reply = NULL;
            rc = redlock_decoder_next_reply(decoder, &reply);
            if (rc != REDLOCK_OK) {
                error_code = redlock_result_name(rc);
                /* Protocol errors are sticky. */
                redlock_reply *again = NULL;
                if (redlock_decoder_next_reply(decoder, &again) != rc) ok = fail("error not sticky");
                break;
            }
            if (!reply) break;
            json_push(replies, reply_to_json(reply));
            redlock_reply_free(reply);
        }
    }
    redlock_decoder_free(decoder);
    if (ok && !json_equal(replies, json_get(vector, "replies"))) {
        char *a = json_dump(json_get(vector, "replies")), *b = json_dump(replies);
        ok = fail("replies %.2000s expected %.2000s", b, a);
        free(a);
        free(b);
    }
    const char *expected_error = json_string(json_get(vector, "error"));
    if (ok && ((expected_error == NULL) != (error_code == NULL) ||
               (error_code && strcmp(error_code, expected_error) != 0)))
        ok = fail("error %s, expected %s", error_code ? error_code : "null",
                  expected_error ? expected_error : "null");
    json_free(replies);
    json_free(vector);
    return ok;
}

static int compare_names(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Runs every *.json in `dir`; returns the number of failures, or -1 if none exist. */
static int run_dir(const char *dir, bool resp, size_t *out_count) {
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "cannot open %s\n", dir);
        return -1;
    }
    char **names = NULL;
    size_t count = 0;
    struct dirent *entry;
    while ((entry = readdir(d))) {
        size_t n = strlen(entry->d_name);
        if (n > 5 && strcmp(entry->d_name + n - 5, ".json") == 0) {
            names = realloc(names, (count + 1) * sizeof *names);
            names[count++] = dup_text(entry->d_name);
        }
    }
    closedir(d);
    qsort(names, count, sizeof *names, compare_names);
    int failed = 0;
    for (size_t i = 0; i < count; i++) {
        char path[4096], stem[1024];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        snprintf(stem, sizeof stem, "%.*s", (int)(strlen(names[i]) - 5), names[i]);
        failure[0] = '\0';
        bool ok = resp ? run_resp_vector(path) : run_vector(path, stem);
        if (!ok) {
            failed++;
            fprintf(stderr, "FAIL %s: %s\n", path, failure);
        }
        free(names[i]);
    }
    free(names);
    *out_count = count;
    return failed;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s <tests/vectors directory>\n", argv[0]);
        return 2;
    }
    char resp_dir[4096];
    snprintf(resp_dir, sizeof resp_dir, "%s/resp", argv[1]);
    size_t vectors = 0, resp_vectors = 0, fencing = 0, waiting = 0, inspect = 0, keepalive = 0;
    char fencing_dir[4096], waiting_dir[4096], inspect_dir[4096], keepalive_dir[4096];
    snprintf(inspect_dir, sizeof inspect_dir, "%s/inspect", argv[1]);
    snprintf(fencing_dir, sizeof fencing_dir, "%s/fencing", argv[1]);
    snprintf(waiting_dir, sizeof waiting_dir, "%s/waiting", argv[1]);
    snprintf(keepalive_dir, sizeof keepalive_dir, "%s/keepalive", argv[1]);
    int failed = run_dir(argv[1], false, &vectors);
    int fencing_failed = run_dir(fencing_dir, false, &fencing);
    int waiting_failed = run_dir(waiting_dir, false, &waiting);
    int inspect_failed = run_dir(inspect_dir, false, &inspect);
    int keepalive_failed = run_dir(keepalive_dir, false, &keepalive);
    int resp_failed = run_dir(resp_dir, true, &resp_vectors);
    if (failed < 0 || resp_failed < 0 || fencing_failed < 0 || waiting_failed < 0 ||
        inspect_failed < 0 || keepalive_failed < 0 || vectors == 0 || resp_vectors == 0 ||
        fencing == 0 || waiting == 0 || inspect == 0) {
        fprintf(stderr, "no vectors found under %s\n", argv[1]);
        return 1;
    }
    /* As core/tests/vectors.rs: a moved or emptied folder must not pass as "nothing
     * failed". */
    if (keepalive < 4) {
        fprintf(stderr, "only %zu keep-alive vectors under %s\n", keepalive, keepalive_dir);
        return 1;
    }
    size_t total = vectors + fencing + waiting + inspect + keepalive + resp_vectors;
    size_t total_failed = (size_t)failed + (size_t)fencing_failed + (size_t)waiting_failed +
                          (size_t)inspect_failed + (size_t)keepalive_failed + (size_t)resp_failed;
    printf("vectors: %zu conformance (%zu fencing, %zu waiting, %zu inspection, %zu keep-alive) "
           "and %zu RESP vectors replayed through the C ABI\n",
           vectors + fencing + waiting + inspect + keepalive, fencing, waiting, inspect, keepalive,
           resp_vectors);
    printf("%zu passed, %zu failed\n", total - total_failed, total_failed);
    return total_failed ? 1 : 0;
}
