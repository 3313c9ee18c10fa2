/* Every error path of the C ABI: NULL for each pointer, zero lengths, invalid UTF-8,
 * misuse of operations, too-small buffers, every usage and configuration error, and
 * outputs left untouched when a call fails. Run under valgrind by ffi/tests/run.sh. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "redlock.h"

static int checks, failures;

#define EXPECT(call, code)                                                               \
    do {                                                                                 \
        redlock_result got_ = (call);                                                    \
        checks++;                                                                        \
        if (got_ != (code)) {                                                            \
            failures++;                                                                  \
            fprintf(stderr, "%s:%d: %s gave %s, expected %s\n", __FILE__, __LINE__, #call, \
                    redlock_result_name(got_), redlock_result_name(code));               \
        }                                                                                \
    } while (0)

#define CHECK(cond)                                                                      \
    do {                                                                                 \
        checks++;                                                                        \
        if (!(cond)) {                                                                   \
            failures++;                                                                  \
            fprintf(stderr, "%s:%d: %s is false\n", __FILE__, __LINE__, #cond);          \
        }                                                                                \
    } while (0)

#define OK(call) EXPECT(call, REDLOCK_OK)
#define NUL_ARG(call) EXPECT(call, REDLOCK_NULL_PARAMETER)

static const uint8_t SEED[REDLOCK_SEED_LEN] = {1, 2, 3};
static const uint8_t *const ONE[] = {(const uint8_t *)"orders:42"};
static const size_t ONE_LEN[] = {9};

static redlock_config *make_config(size_t nodes, uint64_t ttl_ms) {
    redlock_config_builder *builder = NULL;
    redlock_config *config = NULL;
    OK(redlock_config_builder_new(nodes, ttl_ms, &builder));
    OK(redlock_config_builder_build(builder, &config));
    redlock_config_builder_free(builder);
    return config;
}

/* Acquires ONE on 5 nodes with every node answering OK through `reply`. */
static redlock_outcome *acquire_all_ok(redlock_client *client, uint64_t now) {
    redlock_operation *op = NULL;
    redlock_outcome *outcome = NULL;
    OK(redlock_client_acquire(client, ONE, ONE_LEN, 1, now, &op));
    uint64_t ids[16];
    size_t sent = 0;
    uint32_t kind;
    for (;;) {
        OK(redlock_operation_poll_output(op, &kind));
        if (kind != REDLOCK_OUTPUT_SEND) break;
        size_t node, argc;
        uint64_t deadline;
        OK(redlock_operation_command(op, &node, &ids[sent], &deadline, &argc));
        sent++;
    }
    CHECK(sent == 5 && kind == REDLOCK_OUTPUT_WAIT);
    for (size_t i = 0; i < sent && !outcome; i++) {
        OK(redlock_operation_handle_reply(op, ids[i], REDLOCK_REPLY_OK, 0, NULL, 0, now + 100));
        for (;;) {
            OK(redlock_operation_poll_output(op, &kind));
            if (kind == REDLOCK_OUTPUT_NONE) break;
            if (kind == REDLOCK_OUTPUT_OUTCOME) OK(redlock_operation_take_outcome(op, &outcome));
        }
    }
    redlock_operation_free(op);
    CHECK(outcome != NULL);
    return outcome;
}

static void frees_accept_null(void) {
    for (int i = 0; i < 2; i++) {
        redlock_config_builder_free(NULL);
        redlock_config_free(NULL);
        redlock_client_free(NULL);
        redlock_lease_free(NULL);
        redlock_operation_free(NULL);
        redlock_outcome_free(NULL);
        redlock_reply_free(NULL);
        redlock_decoder_free(NULL);
        redlock_link_free(NULL);
        redlock_keepalive_free(NULL);
    }
    checks++;
}

static void null_parameters(void) {
    redlock_config_builder *builder = NULL;
    redlock_config *config = make_config(5, 10000);
    redlock_client *client = NULL;
    OK(redlock_config_builder_new(5, 10000, &builder));
    OK(redlock_client_new_seeded(config, SEED, sizeof SEED, &client));
    redlock_outcome *outcome = acquire_all_ok(client, 1000);
    redlock_lease *lease = NULL;
    OK(redlock_outcome_lease(outcome, &lease));
    redlock_operation *op = NULL;
    OK(redlock_client_release(client, lease, 2000, &op));
    redlock_reply *reply = NULL, *array = NULL;
    OK(redlock_reply_new(REDLOCK_REPLY_INTEGER, 1, NULL, 0, &reply));
    OK(redlock_reply_new(REDLOCK_REPLY_ARRAY, 0, NULL, 0, &array));
    redlock_decoder *decoder = NULL;
    OK(redlock_decoder_new(&decoder));

    uint8_t buf[256];
    size_t n;
    uint64_t u64;
    uint32_t u32;
    bool flag;
    const uint8_t *ptr;
    const uint8_t *ptrs[8];
    size_t lens[8];
    void *handle;

    /* Errors and constants. */
    NUL_ARG(redlock_result_message(REDLOCK_OK, NULL, sizeof buf, &n));
    NUL_ARG(redlock_result_message(REDLOCK_OK, buf, sizeof buf, NULL));

    /* Builder. */
    NUL_ARG(redlock_config_builder_new(5, 10000, NULL));
    NUL_ARG(redlock_config_builder_set_ttl_ms(NULL, 1));
    NUL_ARG(redlock_config_builder_set_drift_factor(NULL, 0.1));
    NUL_ARG(redlock_config_builder_set_drift_fixed_us(NULL, 1));
    NUL_ARG(redlock_config_builder_set_node_timeout_us(NULL, 1));
    NUL_ARG(redlock_config_builder_set_min_validity_us(NULL, 1));
    NUL_ARG(redlock_config_builder_set_attempts(NULL, 1));
    NUL_ARG(redlock_config_builder_set_retry_delay_us(NULL, 1));
    NUL_ARG(redlock_config_builder_set_retry_jitter_us(NULL, 1));
    NUL_ARG(redlock_config_builder_set_token_bytes(NULL, 20));
    NUL_ARG(redlock_config_builder_set_max_extensions(NULL, 1));
    NUL_ARG(redlock_config_builder_set_unbounded_extensions(NULL));
    NUL_ARG(redlock_config_builder_set_key_prefix(NULL, (const uint8_t *)"p", 1));
    NUL_ARG(redlock_config_builder_set_key_prefix(builder, NULL, 1));
    NUL_ARG(redlock_config_builder_build(NULL, (redlock_config **)&handle));
    NUL_ARG(redlock_config_builder_build(builder, NULL));

    /* Config getters: zero for NULL. */
    CHECK(redlock_config_nodes(NULL) == 0 && redlock_config_quorum(NULL) == 0);
    CHECK(redlock_config_ttl_ms(NULL) == 0 && redlock_config_drift_factor(NULL) == 0.0);
    CHECK(redlock_config_drift_fixed_us(NULL) == 0 && redlock_config_drift_us(NULL) == 0);
    CHECK(redlock_config_node_timeout_us(NULL) == 0 && redlock_config_min_validity_us(NULL) == 0);
    CHECK(redlock_config_attempts(NULL) == 0 && redlock_config_retry_delay_us(NULL) == 0);
    CHECK(redlock_config_retry_jitter_us(NULL) == 0 && redlock_config_token_bytes(NULL) == 0);
    NUL_ARG(redlock_config_key_prefix(NULL, &ptr, &n));
    NUL_ARG(redlock_config_key_prefix(config, NULL, &n));
    NUL_ARG(redlock_config_key_prefix(config, &ptr, NULL));
    NUL_ARG(redlock_config_max_extensions(NULL, &flag, &u32));
    NUL_ARG(redlock_config_max_extensions(config, NULL, &u32));
    NUL_ARG(redlock_config_max_extensions(config, &flag, NULL));

    /* Client. */
    NUL_ARG(redlock_client_new(NULL, (redlock_client **)&handle));
    NUL_ARG(redlock_client_new(config, NULL));
    NUL_ARG(redlock_client_new_seeded(NULL, SEED, sizeof SEED, (redlock_client **)&handle));
    NUL_ARG(redlock_client_new_seeded(config, NULL, sizeof SEED, (redlock_client **)&handle));
    NUL_ARG(redlock_client_new_seeded(config, SEED, sizeof SEED, NULL));
    redlock_operation **out_op = (redlock_operation **)&handle;
    NUL_ARG(redlock_client_acquire(NULL, ONE, ONE_LEN, 1, 0, out_op));
    NUL_ARG(redlock_client_acquire(client, NULL, ONE_LEN, 1, 0, out_op));
    NUL_ARG(redlock_client_acquire(client, ONE, NULL, 1, 0, out_op));
    NUL_ARG(redlock_client_acquire(client, ONE, ONE_LEN, 1, 0, NULL));
    const uint8_t *const with_null[] = {NULL};
    NUL_ARG(redlock_client_acquire(client, with_null, ONE_LEN, 1, 0, out_op));
    NUL_ARG(redlock_client_acquire_for(NULL, ONE, ONE_LEN, 1, 5000, 0, out_op));
    NUL_ARG(redlock_client_acquire_for(client, NULL, ONE_LEN, 1, 5000, 0, out_op));
    NUL_ARG(redlock_client_acquire_for(client, ONE, NULL, 1, 5000, 0, out_op));
    NUL_ARG(redlock_client_acquire_for(client, ONE, ONE_LEN, 1, 5000, 0, NULL));
    uint8_t random[64] = {0};
    NUL_ARG(redlock_client_acquire_with_random(NULL, ONE, ONE_LEN, 1, random, 64, 0, out_op));
    NUL_ARG(redlock_client_acquire_with_random(client, NULL, ONE_LEN, 1, random, 64, 0, out_op));
    NUL_ARG(redlock_client_acquire_with_random(client, ONE, NULL, 1, random, 64, 0, out_op));
    NUL_ARG(redlock_client_acquire_with_random(client, ONE, ONE_LEN, 1, NULL, 64, 0, out_op));
    NUL_ARG(redlock_client_acquire_with_random(client, ONE, ONE_LEN, 1, random, 64, 0, NULL));
    NUL_ARG(redlock_client_extend(NULL, lease, 0, out_op));
    NUL_ARG(redlock_client_extend(client, NULL, 0, out_op));
    NUL_ARG(redlock_client_extend(client, lease, 0, NULL));
    NUL_ARG(redlock_client_extend_for(NULL, lease, 5000, 0, out_op));
    NUL_ARG(redlock_client_extend_for(client, NULL, 5000, 0, out_op));
    NUL_ARG(redlock_client_extend_for(client, lease, 5000, 0, NULL));
    NUL_ARG(redlock_client_release(NULL, lease, 0, out_op));
    NUL_ARG(redlock_client_release(client, NULL, 0, out_op));
    NUL_ARG(redlock_client_release(client, lease, 0, NULL));
    NUL_ARG(redlock_client_check_ttl(NULL, 5000));
    redlock_lease **out_lease = (redlock_lease **)&handle;
    NUL_ARG(redlock_client_lease(NULL, ONE, ONE_LEN, 1, (const uint8_t *)"t", 1, 0, out_lease));
    NUL_ARG(redlock_client_lease(client, NULL, ONE_LEN, 1, (const uint8_t *)"t", 1, 0, out_lease));
    NUL_ARG(redlock_client_lease(client, ONE, NULL, 1, (const uint8_t *)"t", 1, 0, out_lease));
    NUL_ARG(redlock_client_lease(client, ONE, ONE_LEN, 1, NULL, 1, 0, out_lease));
    NUL_ARG(redlock_client_lease(client, ONE, ONE_LEN, 1, (const uint8_t *)"t", 1, 0, NULL));
    NUL_ARG(redlock_client_generate_token(NULL, buf, sizeof buf, &n));
    NUL_ARG(redlock_client_generate_token(client, NULL, sizeof buf, &n));
    NUL_ARG(redlock_client_generate_token(client, buf, sizeof buf, NULL));
    NUL_ARG(redlock_token_from_random_bytes(NULL, 20, buf, sizeof buf, &n));
    NUL_ARG(redlock_token_from_random_bytes(random, 20, NULL, sizeof buf, &n));
    NUL_ARG(redlock_token_from_random_bytes(random, 20, buf, sizeof buf, NULL));
    NUL_ARG(redlock_client_next_extension(NULL, lease, 0, &flag, &u64));
    NUL_ARG(redlock_client_next_extension(client, NULL, 0, &flag, &u64));
    NUL_ARG(redlock_client_next_extension(client, lease, 0, NULL, &u64));
    NUL_ARG(redlock_client_next_extension(client, lease, 0, &flag, NULL));

    /* Lease. */
    NUL_ARG(redlock_lease_clone(NULL, out_lease));
    NUL_ARG(redlock_lease_clone(lease, NULL));
    NUL_ARG(redlock_lease_token(NULL, &ptr, &n));
    NUL_ARG(redlock_lease_token(lease, NULL, &n));
    NUL_ARG(redlock_lease_token(lease, &ptr, NULL));
    NUL_ARG(redlock_lease_key(NULL, 0, &ptr, &n));
    NUL_ARG(redlock_lease_key(lease, 0, NULL, &n));
    NUL_ARG(redlock_lease_key(lease, 0, &ptr, NULL));
    CHECK(redlock_lease_key_count(NULL) == 0 && redlock_lease_valid_until(NULL) == 0);
    CHECK(redlock_lease_validity(NULL, 0) == 0 && !redlock_lease_is_valid(NULL, 0));
    CHECK(redlock_lease_ttl_ms(NULL) == 0 && redlock_lease_extensions(NULL) == 0);

    /* Operation. */
    NUL_ARG(redlock_operation_handle_reply(NULL, 1, REDLOCK_REPLY_OK, 0, NULL, 0, 0));
    NUL_ARG(redlock_operation_handle_reply(op, 1, REDLOCK_REPLY_ERROR, 0, NULL, 3, 0));
    NUL_ARG(redlock_operation_handle_reply_value(NULL, 1, reply, 0));
    NUL_ARG(redlock_operation_handle_reply_value(op, 1, NULL, 0));
    NUL_ARG(redlock_operation_handle_timeout(NULL, 0));
    NUL_ARG(redlock_operation_poll_output(NULL, &u32));
    NUL_ARG(redlock_operation_poll_output(op, NULL));
    OK(redlock_operation_poll_output(op, &u32));
    CHECK(u32 == REDLOCK_OUTPUT_SEND);
    /* Output pointers never alias one another. */
    size_t argc;
    uint64_t deadline;
    NUL_ARG(redlock_operation_command(NULL, &n, &u64, &deadline, &argc));
    NUL_ARG(redlock_operation_command(op, NULL, &u64, &deadline, &argc));
    NUL_ARG(redlock_operation_command(op, &n, NULL, &deadline, &argc));
    NUL_ARG(redlock_operation_command(op, &n, &u64, NULL, &argc));
    NUL_ARG(redlock_operation_command(op, &n, &u64, &deadline, NULL));
    NUL_ARG(redlock_operation_command_arg(NULL, 0, &ptr, &n));
    NUL_ARG(redlock_operation_command_arg(op, 0, NULL, &n));
    NUL_ARG(redlock_operation_command_arg(op, 0, &ptr, NULL));
    NUL_ARG(redlock_operation_command_args(NULL, ptrs, lens, 8, &n));
    NUL_ARG(redlock_operation_command_args(op, NULL, lens, 8, &n));
    NUL_ARG(redlock_operation_command_args(op, ptrs, NULL, 8, &n));
    NUL_ARG(redlock_operation_command_args(op, ptrs, lens, 8, NULL));
    NUL_ARG(redlock_operation_command_resp(NULL, &ptr, &n));
    NUL_ARG(redlock_operation_command_resp(op, NULL, &n));
    NUL_ARG(redlock_operation_command_resp(op, &ptr, NULL));
    NUL_ARG(redlock_operation_command_kind(NULL, &u32, &flag));
    NUL_ARG(redlock_operation_command_kind(op, NULL, &flag));
    NUL_ARG(redlock_operation_command_kind(op, &u32, NULL));
    NUL_ARG(redlock_operation_wait_until(NULL, &u64));
    NUL_ARG(redlock_operation_wait_until(op, NULL));
    NUL_ARG(redlock_operation_take_outcome(NULL, (redlock_outcome **)&handle));
    NUL_ARG(redlock_operation_take_outcome(op, NULL));
    NUL_ARG(redlock_operation_abandon(NULL, 1));
    NUL_ARG(redlock_operation_handle_delivery(NULL, NULL, 1));
    NUL_ARG(redlock_operation_handle_delivery(op, NULL, 1));
    NUL_ARG(redlock_operation_token(NULL, &ptr, &n));
    NUL_ARG(redlock_operation_token(op, NULL, &n));
    NUL_ARG(redlock_operation_token(op, &ptr, NULL));
    NUL_ARG(redlock_operation_node(NULL, 0, &u32, &ptr, &n));
    NUL_ARG(redlock_operation_node(op, 0, NULL, &ptr, &n));
    NUL_ARG(redlock_operation_node(op, 0, &u32, NULL, &n));
    NUL_ARG(redlock_operation_node(op, 0, &u32, &ptr, NULL));
    CHECK(redlock_operation_kind(NULL) == 0 && !redlock_operation_is_finished(NULL));
    CHECK(redlock_operation_attempt(NULL) == 0 && redlock_operation_node_count(NULL) == 0);

    /* Outcome. */
    CHECK(redlock_outcome_kind(NULL) == 0 && !redlock_outcome_is_success(NULL));
    CHECK(redlock_outcome_node_count(NULL) == 0);
    NUL_ARG(redlock_outcome_reason(NULL, &u32));
    NUL_ARG(redlock_outcome_reason(outcome, NULL));
    NUL_ARG(redlock_outcome_token(NULL, &ptr, &n));
    NUL_ARG(redlock_outcome_token(outcome, NULL, &n));
    NUL_ARG(redlock_outcome_token(outcome, &ptr, NULL));
    NUL_ARG(redlock_outcome_valid_until(NULL, &u64));
    NUL_ARG(redlock_outcome_valid_until(outcome, NULL));
    NUL_ARG(redlock_outcome_validity(NULL, &u64));
    NUL_ARG(redlock_outcome_validity(outcome, NULL));
    NUL_ARG(redlock_outcome_attempts(NULL, &u32));
    NUL_ARG(redlock_outcome_attempts(outcome, NULL));
    NUL_ARG(redlock_outcome_extensions(NULL, &u32));
    NUL_ARG(redlock_outcome_extensions(outcome, NULL));
    NUL_ARG(redlock_outcome_retry_at(NULL, &flag, &u64));
    NUL_ARG(redlock_outcome_retry_at(outcome, NULL, &u64));
    NUL_ARG(redlock_outcome_retry_at(outcome, &flag, NULL));
    NUL_ARG(redlock_outcome_is_lost(NULL, &flag));
    NUL_ARG(redlock_outcome_is_lost(outcome, NULL));
    NUL_ARG(redlock_outcome_released(NULL, &n));
    NUL_ARG(redlock_outcome_released(outcome, NULL));
    NUL_ARG(redlock_outcome_lease(NULL, out_lease));
    NUL_ARG(redlock_outcome_lease(outcome, NULL));
    NUL_ARG(redlock_outcome_node(NULL, 0, &u32, &ptr, &n));
    NUL_ARG(redlock_outcome_node(outcome, 0, NULL, &ptr, &n));
    NUL_ARG(redlock_outcome_node(outcome, 0, &u32, NULL, &n));
    NUL_ARG(redlock_outcome_node(outcome, 0, &u32, &ptr, NULL));

    /* Replies and decoder. */
    redlock_reply **out_reply = (redlock_reply **)&handle;
    NUL_ARG(redlock_reply_new(REDLOCK_REPLY_BULK, 0, NULL, 2, out_reply));
    NUL_ARG(redlock_reply_new(REDLOCK_REPLY_OK, 0, NULL, 0, NULL));
    NUL_ARG(redlock_reply_array_push(NULL, reply));
    NUL_ARG(redlock_reply_array_push(array, NULL));
    CHECK(redlock_reply_kind(NULL) == 0 && redlock_reply_array_len(NULL) == 0);
    NUL_ARG(redlock_reply_integer(NULL, (int64_t *)&u64));
    NUL_ARG(redlock_reply_integer(reply, NULL));
    NUL_ARG(redlock_reply_bytes(NULL, &ptr, &n));
    NUL_ARG(redlock_reply_bytes(reply, NULL, &n));
    NUL_ARG(redlock_reply_bytes(reply, &ptr, NULL));
    NUL_ARG(redlock_reply_array_get(NULL, 0, out_reply));
    NUL_ARG(redlock_reply_array_get(array, 0, NULL));
    NUL_ARG(redlock_decoder_new(NULL));
    NUL_ARG(redlock_decoder_new_with_limits(1, 1, 1, 1, NULL));
    NUL_ARG(redlock_decoder_feed(NULL, (const uint8_t *)"+OK\r\n", 5));
    NUL_ARG(redlock_decoder_feed(decoder, NULL, 5));
    NUL_ARG(redlock_decoder_next_reply(NULL, out_reply));
    NUL_ARG(redlock_decoder_next_reply(decoder, NULL));
    CHECK(redlock_decoder_buffered(NULL) == 0);

    redlock_decoder_free(decoder);
    redlock_reply_free(array);
    redlock_reply_free(reply);
    redlock_operation_free(op);
    redlock_lease_free(lease);
    redlock_outcome_free(outcome);
    redlock_client_free(client);
    redlock_config_free(config);
    redlock_config_builder_free(builder);
}

static void config_errors(void) {
    static const struct {
        size_t nodes;
        uint64_t ttl_ms;
        int setting;
        uint64_t value;
        redlock_result code;
        const char *name;
    } cases[] = {
        {0, 1000, 0, 0, REDLOCK_CONFIG_NO_NODES, "no_nodes"},
        {256, 1000, 0, 0, REDLOCK_CONFIG_TOO_MANY_NODES, "too_many_nodes"},
        {5, 0, 0, 0, REDLOCK_CONFIG_TTL_ZERO, "ttl_zero"},
        {5, 1000000000001ull, 0, 0, REDLOCK_CONFIG_TTL_TOO_LARGE, "ttl_too_large"},
        {5, 1000, 1, 0, REDLOCK_CONFIG_DRIFT_FACTOR_INVALID, "drift_factor_invalid"},
        {5, 1000, 2, 0, REDLOCK_CONFIG_DRIFT_TOO_LARGE, "drift_too_large"},
        {5, 1000, 3, 988000, REDLOCK_CONFIG_MIN_VALIDITY_TOO_LARGE, "min_validity_too_large"},
        {5, 1000, 4, 0, REDLOCK_CONFIG_NODE_TIMEOUT_ZERO, "node_timeout_zero"},
        {5, 1000, 4, 988000, REDLOCK_CONFIG_NODE_TIMEOUT_TOO_LARGE, "node_timeout_too_large"},
        {5, 1000, 5, 0, REDLOCK_CONFIG_ATTEMPTS_ZERO, "attempts_zero"},
        {5, 1000, 5, 1000001, REDLOCK_CONFIG_TOO_MANY_ATTEMPTS, "too_many_attempts"},
        {5, 1000, 6, 2000, REDLOCK_CONFIG_JITTER_TOO_LARGE, "jitter_too_large"},
        {5, 1000, 7, 15, REDLOCK_CONFIG_TOKEN_TOO_SHORT, "token_too_short"},
        {5, 1000, 7, 65, REDLOCK_CONFIG_TOKEN_TOO_LONG, "token_too_long"},
        {5, 1000, 8, 500, REDLOCK_CONFIG_RETRY_DELAY_TOO_SHORT, "retry_delay_too_short"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        redlock_config_builder *b = NULL;
        OK(redlock_config_builder_new(cases[i].nodes, cases[i].ttl_ms, &b));
        switch (cases[i].setting) {
        case 1: OK(redlock_config_builder_set_drift_factor(b, 1.0)); break;
        case 2: OK(redlock_config_builder_set_drift_factor(b, 0.999)); break;
        case 3: OK(redlock_config_builder_set_min_validity_us(b, cases[i].value)); break;
        case 4: OK(redlock_config_builder_set_node_timeout_us(b, cases[i].value)); break;
        case 5: OK(redlock_config_builder_set_attempts(b, (uint32_t)cases[i].value)); break;
        case 6:
            OK(redlock_config_builder_set_retry_delay_us(b, 1000));
            OK(redlock_config_builder_set_retry_jitter_us(b, cases[i].value));
            break;
        case 7: OK(redlock_config_builder_set_token_bytes(b, (size_t)cases[i].value)); break;
        case 8:
            OK(redlock_config_builder_set_retry_jitter_us(b, 0));
            OK(redlock_config_builder_set_retry_delay_us(b, cases[i].value));
            break;
        default: break;
        }
        redlock_config *sentinel = (redlock_config *)&cases[i];
        redlock_config *config = sentinel;
        EXPECT(redlock_config_builder_build(b, &config), cases[i].code);
        CHECK(config == sentinel); /* outputs are written only on success */
        CHECK(strcmp(redlock_result_name(cases[i].code), cases[i].name) == 0);
        /* The builder survives a failed build: fix it and build again. */
        if (cases[i].nodes == 5 && cases[i].ttl_ms == 1000 && cases[i].setting >= 3) {
            redlock_config_builder *fixed = NULL;
            OK(redlock_config_builder_new(5, 1000, &fixed));
            OK(redlock_config_builder_build(fixed, &config));
            redlock_config_free(config);
            redlock_config_builder_free(fixed);
        }
        redlock_config_builder_free(b);
    }
    /* NaN is no drift factor either. */
    redlock_config_builder *b = NULL;
    redlock_config *config = NULL;
    OK(redlock_config_builder_new(5, 1000, &b));
    OK(redlock_config_builder_set_drift_factor(b, 0.0 / 0.0 != 0.0 / 0.0 ? 0.0 / 0.0 : -1.0));
    EXPECT(redlock_config_builder_build(b, &config), REDLOCK_CONFIG_DRIFT_FACTOR_INVALID);
    /* Every setting at once, read back through the getters. */
    OK(redlock_config_builder_set_drift_factor(b, 0.02));
    OK(redlock_config_builder_set_ttl_ms(b, 20000));
    OK(redlock_config_builder_set_drift_fixed_us(b, 3000));
    OK(redlock_config_builder_set_node_timeout_us(b, 40000));
    OK(redlock_config_builder_set_min_validity_us(b, 1000));
    OK(redlock_config_builder_set_attempts(b, 7));
    OK(redlock_config_builder_set_retry_delay_us(b, 300000));
    OK(redlock_config_builder_set_retry_jitter_us(b, 50000));
    OK(redlock_config_builder_set_token_bytes(b, 32));
    OK(redlock_config_builder_set_key_prefix(b, (const uint8_t *)"lock:", 5));
    OK(redlock_config_builder_set_max_extensions(b, 4));
    OK(redlock_config_builder_build(b, &config));
    CHECK(redlock_config_nodes(config) == 5 && redlock_config_quorum(config) == 3);
    CHECK(redlock_config_ttl_ms(config) == 20000 && redlock_config_drift_factor(config) == 0.02);
    CHECK(redlock_config_drift_fixed_us(config) == 3000);
    CHECK(redlock_config_drift_us(config) == 400000 + 3000);
    CHECK(redlock_config_node_timeout_us(config) == 40000);
    CHECK(redlock_config_min_validity_us(config) == 1000 && redlock_config_attempts(config) == 7);
    CHECK(redlock_config_retry_delay_us(config) == 300000);
    CHECK(redlock_config_retry_jitter_us(config) == 50000 && redlock_config_token_bytes(config) == 32);
    const uint8_t *prefix;
    size_t prefix_len;
    OK(redlock_config_key_prefix(config, &prefix, &prefix_len));
    CHECK(prefix_len == 5 && memcmp(prefix, "lock:", 5) == 0);
    bool bounded;
    uint32_t max;
    OK(redlock_config_max_extensions(config, &bounded, &max));
    CHECK(bounded && max == 4);
    redlock_config_free(config);
    OK(redlock_config_builder_set_unbounded_extensions(b));
    OK(redlock_config_builder_set_key_prefix(b, NULL, 0)); /* zero length: empty prefix */
    OK(redlock_config_builder_build(b, &config));
    OK(redlock_config_max_extensions(config, &bounded, &max));
    CHECK(!bounded && max == 0);
    OK(redlock_config_key_prefix(config, &prefix, &prefix_len));
    CHECK(prefix_len == 0);
    redlock_config_free(config);
    redlock_config_builder_free(b);
    /* The defaults are the documented ones. */
    config = make_config(3, 100);
    CHECK(redlock_config_node_timeout_us(config) == 10000); /* a tenth of the TTL */
    CHECK(redlock_config_drift_fixed_us(config) == REDLOCK_DEFAULT_DRIFT_FIXED_US);
    CHECK(redlock_config_retry_delay_us(config) == REDLOCK_DEFAULT_RETRY_DELAY_US);
    CHECK(redlock_config_retry_jitter_us(config) == REDLOCK_DEFAULT_RETRY_JITTER_US);
    CHECK(redlock_config_attempts(config) == REDLOCK_DEFAULT_ATTEMPTS);
    CHECK(redlock_config_token_bytes(config) == REDLOCK_DEFAULT_TOKEN_BYTES);
    CHECK(redlock_config_drift_factor(config) == 0.01);
    redlock_config_free(config);
    CHECK(redlock_max_ttl_ms() == 1000000000000ull);
    CHECK(redlock_notice_channel_linger_ms() == 500);
    CHECK(redlock_subscriber_reopen_first_ms() == 100);
    CHECK(redlock_subscriber_reopen_max_ms() == 5000);
    CHECK(redlock_connect_timeout_default_ms() == 2000);
    CHECK(redlock_sentinel_query_timeout_default_ms() == 500);
    CHECK(redlock_sentinel_connect_timeout_ms(3, 500, 2000) == 3500);
    CHECK(redlock_sentinel_connect_timeout_ms((size_t)-1, 500, 2000) == UINT64_MAX);
}

static void usage_errors(void) {
    redlock_config *config = make_config(5, 10000);
    redlock_client *client = NULL;
    OK(redlock_client_new_seeded(config, SEED, sizeof SEED, &client));
    redlock_operation *sentinel = (redlock_operation *)&client, *op = sentinel;

    /* Zero lengths and counts. */
    EXPECT(redlock_client_acquire(client, NULL, NULL, 0, 0, &op), REDLOCK_NO_RESOURCES);
    const uint8_t *const empty[] = {NULL};
    const size_t zero[] = {0};
    EXPECT(redlock_client_acquire(client, empty, zero, 1, 0, &op), REDLOCK_EMPTY_RESOURCE);
    const uint8_t *const twice[] = {(const uint8_t *)"a", (const uint8_t *)"a"};
    const size_t one_each[] = {1, 1};
    EXPECT(redlock_client_acquire(client, twice, one_each, 2, 0, &op), REDLOCK_DUPLICATE_RESOURCE);
    /* Another lock's auxiliary key (its turn key, its fence key) is refused. */
    const uint8_t *const reserved[] = {(const uint8_t *)"{r}:waiters:turn", (const uint8_t *)"{r}:fence"};
    const size_t reserved_lens[] = {16, 9};
    EXPECT(redlock_client_acquire(client, reserved, reserved_lens, 1, 0, &op), REDLOCK_RESERVED_RESOURCE);
    EXPECT(redlock_client_acquire(client, reserved + 1, reserved_lens + 1, 1, 0, &op),
           REDLOCK_RESERVED_RESOURCE);
    CHECK(strcmp(redlock_result_name(REDLOCK_RESERVED_RESOURCE), "reserved_resource") == 0);
    const uint8_t *many[REDLOCK_MAX_RESOURCES + 1];
    size_t many_lens[REDLOCK_MAX_RESOURCES + 1];
    char names[REDLOCK_MAX_RESOURCES + 1][8];
    for (size_t i = 0; i <= REDLOCK_MAX_RESOURCES; i++) {
        many_lens[i] = (size_t)snprintf(names[i], sizeof names[i], "r%zu", i);
        many[i] = (const uint8_t *)names[i];
    }
    EXPECT(redlock_client_acquire(client, many, many_lens, REDLOCK_MAX_RESOURCES + 1, 0, &op),
           REDLOCK_TOO_MANY_RESOURCES);
    OK(redlock_client_acquire(client, many, many_lens, REDLOCK_MAX_RESOURCES, 0, &op));
    redlock_operation_free(op);
    op = sentinel;
    uint8_t random[100] = {0};
    /* 3 attempts of 20 bytes and 2 jitters of 8: 76 bytes. */
    EXPECT(redlock_client_acquire_with_random(client, ONE, ONE_LEN, 1, NULL, 0, 0, &op),
           REDLOCK_NOT_ENOUGH_RANDOM_BYTES);
    EXPECT(redlock_client_acquire_with_random(client, ONE, ONE_LEN, 1, random, 75, 0, &op),
           REDLOCK_NOT_ENOUGH_RANDOM_BYTES);
    CHECK(op == sentinel);
    OK(redlock_client_acquire_with_random(client, ONE, ONE_LEN, 1, random, 76, 0, &op));
    redlock_operation_free(op);
    op = sentinel;

    /* A per-operation TTL the configuration cannot take, and why. */
    EXPECT(redlock_client_acquire_for(client, ONE, ONE_LEN, 1, 0, 0, &op), REDLOCK_INVALID_TTL);
    EXPECT(redlock_client_check_ttl(client, 0), REDLOCK_CONFIG_TTL_ZERO);
    EXPECT(redlock_client_check_ttl(client, 1000000000001ull), REDLOCK_CONFIG_TTL_TOO_LARGE);
    OK(redlock_client_check_ttl(client, 5000));
    CHECK(op == sentinel);
    OK(redlock_client_acquire_for(client, ONE, ONE_LEN, 1, 5000, 0, &op));
    uint32_t kind;
    OK(redlock_operation_poll_output(op, &kind));
    const uint8_t *arg;
    size_t arg_len;
    OK(redlock_operation_command_arg(op, 5, &arg, &arg_len));
    CHECK(arg_len == 4 && memcmp(arg, "5000", 4) == 0);
    redlock_operation_free(op);

    /* Tokens: empty, with a space, too long, invalid UTF-8 (text is expected). */
    redlock_lease *lease_sentinel = (redlock_lease *)&client, *lease = lease_sentinel;
    EXPECT(redlock_client_lease(client, ONE, ONE_LEN, 1, NULL, 0, 0, &lease), REDLOCK_INVALID_TOKEN);
    EXPECT(redlock_client_lease(client, ONE, ONE_LEN, 1, (const uint8_t *)"a b", 3, 0, &lease),
           REDLOCK_INVALID_TOKEN);
    uint8_t long_token[REDLOCK_MAX_TOKEN_TEXT + 1];
    memset(long_token, 'a', sizeof long_token);
    EXPECT(redlock_client_lease(client, ONE, ONE_LEN, 1, long_token, sizeof long_token, 0, &lease),
           REDLOCK_INVALID_TOKEN);
    const uint8_t not_utf8[] = {'a', 0xff, 0xfe};
    EXPECT(redlock_client_lease(client, ONE, ONE_LEN, 1, not_utf8, 3, 0, &lease),
           REDLOCK_INVALID_TOKEN);
    EXPECT(redlock_client_lease(client, NULL, NULL, 0, (const uint8_t *)"t", 1, 0, &lease),
           REDLOCK_NO_RESOURCES);
    CHECK(lease == lease_sentinel);
    OK(redlock_client_lease(client, ONE, ONE_LEN, 1, long_token, REDLOCK_MAX_TOKEN_TEXT, 7, &lease));
    CHECK(redlock_lease_valid_until(lease) == 7 && redlock_lease_ttl_ms(lease) == 10000);
    redlock_operation *extend = sentinel;
    EXPECT(redlock_client_extend_for(client, lease, 0, 0, &extend), REDLOCK_INVALID_TTL);
    CHECK(extend == sentinel);
    OK(redlock_client_extend_for(client, lease, 20000, 0, &extend));
    CHECK(redlock_operation_kind(extend) == REDLOCK_OPERATION_EXTEND);
    redlock_operation_free(extend);
    redlock_lease_free(lease);

    /* Seeds are exactly 32 bytes. */
    redlock_client *other = (redlock_client *)&client;
    EXPECT(redlock_client_new_seeded(config, SEED, 31, &other), REDLOCK_INVALID_INPUT);
    EXPECT(redlock_client_new_seeded(config, NULL, 0, &other), REDLOCK_INVALID_INPUT);
    CHECK(other == (redlock_client *)&client);

    redlock_client_free(client);
    redlock_config_free(config);
}

static void operation_misuse(void) {
    redlock_config *config = make_config(5, 10000);
    redlock_client *client = NULL;
    OK(redlock_client_new_seeded(config, SEED, sizeof SEED, &client));
    redlock_operation *op = NULL;
    OK(redlock_client_acquire(client, ONE, ONE_LEN, 1, 1000, &op));
    CHECK(redlock_operation_kind(op) == REDLOCK_OPERATION_ACQUIRE);
    CHECK(redlock_operation_attempt(op) == 1 && !redlock_operation_is_finished(op));
    uint32_t kind = 77;
    size_t node = 77, argc = 77;
    uint64_t id = 77, deadline = 77;
    /* Before any poll, there is no command. */
    EXPECT(redlock_operation_command(op, &node, &id, &deadline, &argc), REDLOCK_NO_VALUE);
    CHECK(node == 77 && id == 77 && deadline == 77 && argc == 77);
    OK(redlock_operation_poll_output(op, &kind));
    CHECK(kind == REDLOCK_OUTPUT_SEND);
    OK(redlock_operation_command(op, &node, &id, &deadline, &argc));
    CHECK(node == 0 && id == 1 && deadline == 51000 && argc == 6);
    uint32_t command_kind;
    bool is_eval;
    OK(redlock_operation_command_kind(op, &command_kind, &is_eval));
    CHECK(command_kind == REDLOCK_COMMAND_SET && !is_eval);
    const uint8_t *args[6];
    size_t lens[6], got = 99;
    EXPECT(redlock_operation_command_args(op, args, lens, 5, &got), REDLOCK_BUFFER_TOO_SMALL);
    CHECK(got == 99);
    const uint8_t *arg = NULL;
    size_t arg_len = 99;
    EXPECT(redlock_operation_command_arg(op, 6, &arg, &arg_len), REDLOCK_OUT_OF_RANGE);
    CHECK(arg == NULL && arg_len == 99);
    uint64_t until = 5;
    EXPECT(redlock_operation_wait_until(op, &until), REDLOCK_NO_VALUE);
    CHECK(until == 5);

    /* Unknown kinds, arrays through the scalar entry point, unknown request ids. */
    EXPECT(redlock_operation_handle_reply(op, 1, 0, 0, NULL, 0, 1100), REDLOCK_INVALID_INPUT);
    EXPECT(redlock_operation_handle_reply(op, 1, 99, 0, NULL, 0, 1100), REDLOCK_INVALID_INPUT);
    EXPECT(redlock_operation_handle_reply(op, 1, REDLOCK_REPLY_ARRAY, 0, NULL, 0, 1100),
           REDLOCK_INVALID_INPUT);
    EXPECT(redlock_operation_handle_reply(op, 0, REDLOCK_REPLY_OK, 0, NULL, 0, 1100),
           REDLOCK_UNKNOWN_REQUEST);
    EXPECT(redlock_operation_handle_reply(op, 999, REDLOCK_REPLY_OK, 0, NULL, 0, 1100),
           REDLOCK_UNKNOWN_REQUEST);
    EXPECT(redlock_operation_handle_reply(op, UINT64_MAX, REDLOCK_REPLY_OK, 0, NULL, 0, 1100),
           REDLOCK_UNKNOWN_REQUEST);
    /* The failed calls changed nothing: the first round's sends are still queued. */
    size_t sends = 1;
    for (;;) {
        OK(redlock_operation_poll_output(op, &kind));
        if (kind != REDLOCK_OUTPUT_SEND) break;
        sends++;
    }
    CHECK(sends == 5 && kind == REDLOCK_OUTPUT_WAIT);
    OK(redlock_operation_wait_until(op, &until));
    CHECK(until == 51000);
    redlock_outcome *outcome = (redlock_outcome *)&client;
    EXPECT(redlock_operation_take_outcome(op, &outcome), REDLOCK_NO_VALUE);
    CHECK(outcome == (redlock_outcome *)&client);

    /* A node error whose text is not UTF-8 is kept, with U+FFFD for the bad bytes. */
    const uint8_t bad_text[] = {'E', 'R', 'R', ' ', 0xff};
    OK(redlock_operation_handle_reply(op, 1, REDLOCK_REPLY_ERROR, 0, bad_text, sizeof bad_text, 1100));
    OK(redlock_operation_poll_output(op, &kind));
    CHECK(kind == REDLOCK_OUTPUT_WAIT);
    EXPECT(redlock_operation_handle_reply(op, 1, REDLOCK_REPLY_OK, 0, NULL, 0, 1100),
           REDLOCK_DUPLICATE_REPLY);
    uint32_t node_kind;
    const uint8_t *text;
    size_t text_len;
    OK(redlock_operation_node(op, 0, &node_kind, &text, &text_len));
    CHECK(node_kind == REDLOCK_NODE_ERROR && text_len == 7 && memcmp(text, "ERR \xef\xbf\xbd", 7) == 0);
    OK(redlock_operation_node(op, 1, &node_kind, &text, &text_len));
    CHECK(node_kind == REDLOCK_NODE_PENDING && text_len == 0);
    EXPECT(redlock_operation_node(op, 5, &node_kind, &text, &text_len), REDLOCK_OUT_OF_RANGE);
    CHECK(redlock_operation_node_count(op) == 5);

    /* Replies through the RESP decoder, handed over as values. */
    redlock_decoder *decoder = NULL;
    OK(redlock_decoder_new(&decoder));
    const char *stream = "+OK\r\n$-1\r\n+OK\r\n+O";
    OK(redlock_decoder_feed(decoder, (const uint8_t *)stream, strlen(stream)));
    OK(redlock_decoder_feed(decoder, NULL, 0));
    uint64_t next_id = 2;
    for (;;) {
        redlock_reply *reply = (redlock_reply *)&client;
        OK(redlock_decoder_next_reply(decoder, &reply));
        if (!reply) break;
        OK(redlock_operation_handle_reply_value(op, next_id++, reply, 1200));
        redlock_reply_free(reply);
    }
    CHECK(next_id == 5 && redlock_decoder_buffered(decoder) == 2);
    OK(redlock_decoder_feed(decoder, (const uint8_t *)"K\r\n", 3));
    redlock_reply *reply = NULL;
    OK(redlock_decoder_next_reply(decoder, &reply));
    CHECK(reply && redlock_reply_kind(reply) == REDLOCK_REPLY_OK);
    OK(redlock_operation_handle_reply_value(op, next_id, reply, 1300));
    redlock_reply_free(reply);
    OK(redlock_operation_poll_output(op, &kind));
    CHECK(kind == REDLOCK_OUTPUT_OUTCOME);
    CHECK(redlock_operation_is_finished(op));
    bool due = true;
    uint64_t at = 1;
    OK(redlock_operation_take_outcome(op, &outcome));
    CHECK(redlock_outcome_kind(outcome) == REDLOCK_OUTCOME_ACQUIRED);
    CHECK(redlock_outcome_is_success(outcome));
    uint32_t attempts;
    OK(redlock_outcome_attempts(outcome, &attempts));
    CHECK(attempts == 1);
    OK(redlock_outcome_node(outcome, 2, &node_kind, &text, &text_len));
    CHECK(node_kind == REDLOCK_NODE_CONFLICT);
    EXPECT(redlock_outcome_node(outcome, 5, &node_kind, &text, &text_len), REDLOCK_OUT_OF_RANGE);
    uint32_t reason = 42;
    EXPECT(redlock_outcome_reason(outcome, &reason), REDLOCK_NO_VALUE);
    CHECK(reason == 42);
    size_t released = 42;
    EXPECT(redlock_outcome_released(outcome, &released), REDLOCK_NO_VALUE);
    CHECK(released == 42);
    /* After the outcome, misuse is still refused and inputs output nothing. */
    EXPECT(redlock_operation_handle_reply(op, 5, REDLOCK_REPLY_OK, 0, NULL, 0, 1400),
           REDLOCK_DUPLICATE_REPLY);
    OK(redlock_operation_poll_output(op, &kind));
    CHECK(kind == REDLOCK_OUTPUT_NONE);
    OK(redlock_operation_handle_timeout(op, 999999));
    OK(redlock_operation_poll_output(op, &kind));
    CHECK(kind == REDLOCK_OUTPUT_NONE);
    /* Abandoning a finished operation sends nothing. */
    OK(redlock_operation_abandon(op, 1000000));
    OK(redlock_operation_poll_output(op, &kind));
    CHECK(kind == REDLOCK_OUTPUT_NONE);

    /* The lease, its accessors and the next extension. */
    redlock_lease *lease = NULL;
    OK(redlock_outcome_lease(outcome, &lease));
    const uint8_t *token;
    size_t token_len;
    OK(redlock_lease_token(lease, &token, &token_len));
    CHECK(token_len == 40);
    CHECK(redlock_lease_key_count(lease) == 1);
    OK(redlock_lease_key(lease, 0, &text, &text_len));
    CHECK(text_len == 9 && memcmp(text, "orders:42", 9) == 0);
    EXPECT(redlock_lease_key(lease, 1, &text, &text_len), REDLOCK_OUT_OF_RANGE);
    /* valid_until = 1000 + 10 000 000 - 102 000 */
    CHECK(redlock_lease_valid_until(lease) == 9899000);
    CHECK(redlock_lease_validity(lease, 9898000) == 1000 && redlock_lease_validity(lease, 9999999) == 0);
    CHECK(redlock_lease_is_valid(lease, 9898999) && !redlock_lease_is_valid(lease, 9899000));
    CHECK(redlock_lease_ttl_ms(lease) == 10000 && redlock_lease_extensions(lease) == 0);
    OK(redlock_client_next_extension(client, lease, 2000, &due, &at));
    CHECK(due && at == 9899000 - 10000000 / 3);
    OK(redlock_client_next_extension(client, lease, 9899000, &due, &at));
    CHECK(!due && at == 0);
    redlock_lease *copy = NULL;
    OK(redlock_lease_clone(lease, &copy));
    const uint8_t *copy_token;
    size_t copy_token_len;
    OK(redlock_lease_token(copy, &copy_token, &copy_token_len));
    CHECK(copy_token_len == token_len && memcmp(copy_token, token, token_len) == 0 && copy_token != token);
    redlock_lease_free(copy);
    /* The outcome given back as if it had reached no caller: the lock is nobody's, so the
     * release of its token goes to every node, then nothing. The outcome is consumed. */
    NUL_ARG(redlock_operation_decline(op, NULL, 1000100));
    OK(redlock_operation_decline(op, outcome, 1000100));
    outcome = NULL;
    for (int node = 0; node < 5; node++) {
        OK(redlock_operation_poll_output(op, &kind));
        CHECK(kind == REDLOCK_OUTPUT_SEND);
        OK(redlock_operation_command_kind(op, &command_kind, &is_eval));
        CHECK(command_kind == REDLOCK_COMMAND_RELEASE);
    }
    OK(redlock_operation_poll_output(op, &kind));
    CHECK(kind == REDLOCK_OUTPUT_NONE);
    redlock_operation *acquisition = op;

    /* A release, with its commands as RESP and replies decoded from RESP. */
    OK(redlock_client_release(client, lease, 2000, &op));
    CHECK(redlock_operation_kind(op) == REDLOCK_OPERATION_RELEASE);
    OK(redlock_operation_poll_output(op, &kind));
    const uint8_t *resp;
    size_t resp_len;
    OK(redlock_operation_command_resp(op, &resp, &resp_len));
    CHECK(resp_len > 10 && memcmp(resp, "*5\r\n$7\r\nEVALSHA\r\n$40\r\n", 21) == 0);
    OK(redlock_operation_command_kind(op, &command_kind, &is_eval));
    CHECK(command_kind == REDLOCK_COMMAND_RELEASE && !is_eval);
    for (;;) {
        OK(redlock_operation_poll_output(op, &kind));
        if (kind != REDLOCK_OUTPUT_SEND) break;
    }
    OK(redlock_decoder_feed(decoder, (const uint8_t *)":1\r\n:1\r\n:0\r\n", 12));
    for (uint64_t request = 1; request <= 3; request++) {
        OK(redlock_decoder_next_reply(decoder, &reply));
        OK(redlock_operation_handle_reply_value(op, request, reply, 2100));
        redlock_reply_free(reply);
    }
    /* Three of five confirmed the key is gone: the release decided, nodes 3 and 4 pending. */
    OK(redlock_operation_poll_output(op, &kind));
    CHECK(kind == REDLOCK_OUTPUT_OUTCOME);
    OK(redlock_operation_take_outcome(op, &outcome));
    CHECK(redlock_outcome_kind(outcome) == REDLOCK_OUTCOME_RELEASED);
    OK(redlock_outcome_released(outcome, &released));
    CHECK(released == 2);
    OK(redlock_outcome_node(outcome, 4, &node_kind, &text, &text_len));
    CHECK(node_kind == REDLOCK_NODE_PENDING);
    redlock_lease *none = (redlock_lease *)&client;
    EXPECT(redlock_outcome_lease(outcome, &none), REDLOCK_NO_VALUE);
    CHECK(none == (redlock_lease *)&client);
    /* Another operation's outcome is refused, consumed all the same, and sends nothing. */
    EXPECT(redlock_operation_decline(acquisition, outcome, 2200), REDLOCK_FOREIGN_OUTCOME);
    OK(redlock_operation_poll_output(acquisition, &kind));
    CHECK(kind == REDLOCK_OUTPUT_NONE);
    redlock_operation_free(acquisition);
    redlock_operation_free(op);
    redlock_lease_free(lease);
    redlock_decoder_free(decoder);
    redlock_client_free(client);
    redlock_config_free(config);
}

static void replies_and_decoder(void) {
    redlock_reply *reply = NULL, *array = NULL, *item = NULL;
    EXPECT(redlock_reply_new(0, 0, NULL, 0, &reply), REDLOCK_INVALID_INPUT);
    EXPECT(redlock_reply_new(10, 0, NULL, 0, &reply), REDLOCK_INVALID_INPUT);
    CHECK(reply == NULL);
    OK(redlock_reply_new(REDLOCK_REPLY_STATUS, 0, (const uint8_t *)"OK", 2, &reply));
    CHECK(redlock_reply_kind(reply) == REDLOCK_REPLY_OK); /* status OK is OK */
    redlock_reply_free(reply);
    OK(redlock_reply_new(REDLOCK_REPLY_BULK, 0, (const uint8_t *)"a\0b", 3, &reply));
    const uint8_t *bytes;
    size_t len;
    OK(redlock_reply_bytes(reply, &bytes, &len));
    CHECK(len == 3 && memcmp(bytes, "a\0b", 3) == 0);
    int64_t integer = 5;
    EXPECT(redlock_reply_integer(reply, &integer), REDLOCK_NO_VALUE);
    CHECK(integer == 5);
    OK(redlock_reply_new(REDLOCK_REPLY_ARRAY, 0, NULL, 0, &array));
    EXPECT(redlock_reply_array_push(reply, array), REDLOCK_INVALID_INPUT);
    OK(redlock_reply_array_push(array, reply));
    OK(redlock_reply_array_push(array, array)); /* a copy of itself, as it was */
    CHECK(redlock_reply_array_len(array) == 2);
    OK(redlock_reply_array_get(array, 1, &item));
    CHECK(redlock_reply_kind(item) == REDLOCK_REPLY_ARRAY && redlock_reply_array_len(item) == 1);
    redlock_reply_free(item);
    EXPECT(redlock_reply_array_get(array, 2, &item), REDLOCK_OUT_OF_RANGE);
    EXPECT(redlock_reply_array_get(reply, 0, &item), REDLOCK_NO_VALUE);
    EXPECT(redlock_reply_bytes(array, &bytes, &len), REDLOCK_NO_VALUE);
    CHECK(redlock_reply_array_len(reply) == 0);
    redlock_reply_free(array);
    redlock_reply_free(reply);
    OK(redlock_reply_new(REDLOCK_REPLY_INTEGER, -7, NULL, 0, &reply));
    OK(redlock_reply_integer(reply, &integer));
    CHECK(integer == -7);
    redlock_reply_free(reply);

    /* Protocol errors are sticky, and no reply is written. */
    redlock_decoder *decoder = NULL;
    OK(redlock_decoder_new(&decoder));
    OK(redlock_decoder_feed(decoder, (const uint8_t *)"?x\r\n+OK\r\n", 9));
    reply = (redlock_reply *)&decoder;
    EXPECT(redlock_decoder_next_reply(decoder, &reply), REDLOCK_PROTOCOL_UNKNOWN_TYPE);
    EXPECT(redlock_decoder_next_reply(decoder, &reply), REDLOCK_PROTOCOL_UNKNOWN_TYPE);
    CHECK(reply == (redlock_reply *)&decoder);
    redlock_decoder_free(decoder);
    OK(redlock_decoder_new_with_limits(4, 2, 2, 8, &decoder));
    OK(redlock_decoder_feed(decoder, (const uint8_t *)"$5\r\n", 4));
    EXPECT(redlock_decoder_next_reply(decoder, &reply), REDLOCK_PROTOCOL_TOO_LARGE);
    redlock_decoder_free(decoder);
    static const struct {
        const char *bytes;
        redlock_result code;
    } bad[] = {
        {":1x\r\n", REDLOCK_PROTOCOL_BAD_NUMBER},
        {"$1\r\nab\r\n", REDLOCK_PROTOCOL_BAD_TERMINATOR},
        {"#x\r\n", REDLOCK_PROTOCOL_BAD_VALUE},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        OK(redlock_decoder_new(&decoder));
        OK(redlock_decoder_feed(decoder, (const uint8_t *)bad[i].bytes, strlen(bad[i].bytes)));
        EXPECT(redlock_decoder_next_reply(decoder, &reply), bad[i].code);
        redlock_decoder_free(decoder);
    }
    OK(redlock_decoder_new_with_limits(100, 100, 1, 100, &decoder));
    OK(redlock_decoder_feed(decoder, (const uint8_t *)"*1\r\n*1\r\n:1\r\n", 12));
    EXPECT(redlock_decoder_next_reply(decoder, &reply), REDLOCK_PROTOCOL_TOO_DEEP);
    redlock_decoder_free(decoder);
}

static void buffers_and_texts(void) {
    /* Messages: a short buffer writes nothing. */
    char buf[REDLOCK_MESSAGE_MAX];
    memset(buf, 'x', sizeof buf);
    size_t n = 12345;
    EXPECT(redlock_result_message(REDLOCK_NULL_PARAMETER, (uint8_t *)buf, 4, &n),
           REDLOCK_BUFFER_TOO_SMALL);
    CHECK(n == 12345 && buf[0] == 'x');
    EXPECT(redlock_result_message(REDLOCK_NULL_PARAMETER, (uint8_t *)buf, 0, &n),
           REDLOCK_BUFFER_TOO_SMALL);
    /* Every code has a name and a message that fits REDLOCK_MESSAGE_MAX. */
    size_t codes = 0;
    for (uint32_t code = 9000; code < 9400; code++) {
        const char *name = redlock_result_name(code);
        if (strcmp(name, "unknown_result") == 0) continue;
        codes++;
        OK(redlock_result_message(code, (uint8_t *)buf, sizeof buf, &n));
        CHECK(n > 0 && n < sizeof buf && buf[n] == '\0' && strlen(buf) == n);
        EXPECT(redlock_result_message(code, (uint8_t *)buf, n, &n), REDLOCK_BUFFER_TOO_SMALL);
    }
    CHECK(codes == 44);
    CHECK(strcmp(redlock_result_name(0), "unknown_result") == 0);
    CHECK(strcmp(redlock_result_name(REDLOCK_OK), "ok") == 0);
    OK(redlock_result_message(12, (uint8_t *)buf, sizeof buf, &n));
    CHECK(strcmp(buf, "unknown result code") == 0);
    OK(redlock_result_message(REDLOCK_CONFIG_NODE_TIMEOUT_TOO_LARGE, (uint8_t *)buf, sizeof buf, &n));
    CHECK(strstr(buf, "node_timeout") != NULL);

    /* Tokens into caller buffers. */
    redlock_config *config = make_config(3, 10000);
    redlock_client *client = NULL;
    OK(redlock_client_new(config, &client)); /* OS randomness */
    uint8_t token[2 * REDLOCK_MAX_TOKEN_BYTES], other[2 * REDLOCK_MAX_TOKEN_BYTES];
    size_t token_len = 99, other_len;
    EXPECT(redlock_client_generate_token(client, token, 39, &token_len), REDLOCK_BUFFER_TOO_SMALL);
    CHECK(token_len == 99);
    OK(redlock_client_generate_token(client, token, 40, &token_len));
    OK(redlock_client_generate_token(client, other, sizeof other, &other_len));
    CHECK(token_len == 40 && other_len == 40 && memcmp(token, other, 40) != 0);
    for (size_t i = 0; i < token_len; i++)
        CHECK((token[i] >= '0' && token[i] <= '9') || (token[i] >= 'a' && token[i] <= 'f'));
    const uint8_t bytes[16] = {0x00, 0x0f, 0xa5, 0xff};
    EXPECT(redlock_token_from_random_bytes(bytes, 16, token, 31, &token_len), REDLOCK_BUFFER_TOO_SMALL);
    EXPECT(redlock_token_from_random_bytes(bytes, 15, token, sizeof token, &token_len),
           REDLOCK_INVALID_INPUT);
    EXPECT(redlock_token_from_random_bytes(NULL, 0, token, sizeof token, &token_len),
           REDLOCK_INVALID_INPUT);
    OK(redlock_token_from_random_bytes(bytes, 16, token, 32, &token_len));
    CHECK(token_len == 32 && memcmp(token, "000fa5ff000000000000000000000000", 32) == 0);
    redlock_client_free(client);
    redlock_config_free(config);

    /* Static texts. */
    CHECK(strcmp(redlock_version(), "0.1.0") == 0 || strlen(redlock_version()) > 0);
    CHECK(strcmp(redlock_script_sha1(REDLOCK_SCRIPT_RELEASE), "9a4c12ce2a7ef3e2864bdbe648b6d0f0ee05029b") == 0);
    CHECK(strcmp(redlock_script_sha1(REDLOCK_SCRIPT_ACQUIRE), "4df62321cd567593267878acb4c28e1f7a3cc4af") == 0);
    CHECK(strcmp(redlock_script_sha1(REDLOCK_SCRIPT_EXTEND), "6aec6dabb71e80f87fc28910be87b135f17d85ab") == 0);
    CHECK(strstr(redlock_script_text(REDLOCK_SCRIPT_EXTEND), "PEXPIRE") != NULL);
    CHECK(redlock_script_text(0) == NULL && redlock_script_sha1(8) == NULL);
    CHECK(strstr(redlock_script_text(REDLOCK_SCRIPT_FENCED_SET), "fencing token") != NULL);
}

/* Links, keep-alive, error classes and duplicate nodes: NULL for every pointer,
 * invalid enumeration values and UTF-8, misuse (accessors of the wrong output, a
 * command submitted twice), outputs untouched on failure, and one node's whole cycle:
 * connect, scripts first, write, reply, deliver to the operation, abandon. */
static void links_and_keepalive(void) {
    redlock_config *config = make_config(1, 10000);
    redlock_client *client = NULL;
    OK(redlock_client_new_seeded(config, SEED, sizeof SEED, &client));
    redlock_link *link = NULL;
    redlock_operation *op = NULL;
    NUL_ARG(redlock_link_new(NULL));
    OK(redlock_link_new(&link));
    OK(redlock_client_acquire(client, ONE, ONE_LEN, 1, 1000, &op));
    uint8_t buf[8];
    size_t n = 7, argc = 7;
    uint64_t u64 = 7, id = 7, tag = 7, request = 7;
    uint32_t u32 = 7, kind = 7, reason = 7;
    int64_t integer = 7;
    bool flag = true, found = true;
    const uint8_t *ptr = buf, *ptrs[8];
    size_t lens[8], first = 7, second = 7;
    redlock_reply *reply = NULL;

    NUL_ARG(redlock_link_submit_current(NULL, 1, op, 1000));
    NUL_ARG(redlock_link_submit_current(link, 1, NULL, 1000));
    NUL_ARG(redlock_link_handle_connected(NULL, 1));
    NUL_ARG(redlock_link_handle_closed(NULL, REDLOCK_LINK_CAUSE_CLOSED, NULL, 0, 1));
    NUL_ARG(redlock_link_handle_closed(link, REDLOCK_LINK_CAUSE_CLOSED, NULL, 3, 1));
    EXPECT(redlock_link_handle_closed(link, 0, NULL, 0, 1), REDLOCK_INVALID_INPUT);
    EXPECT(redlock_link_handle_closed(link, 6, NULL, 0, 1), REDLOCK_INVALID_INPUT);
    NUL_ARG(redlock_link_handle_reply(NULL, 1, REDLOCK_REPLY_OK, 0, NULL, 0, 1));
    NUL_ARG(redlock_link_handle_reply(link, 1, REDLOCK_REPLY_BULK, 0, NULL, 2, 1));
    EXPECT(redlock_link_handle_reply(link, 1, REDLOCK_REPLY_ARRAY, 0, NULL, 0, 1),
           REDLOCK_INVALID_INPUT);
    EXPECT(redlock_link_handle_reply(link, 1, 99, 0, NULL, 0, 1), REDLOCK_INVALID_INPUT);
    NUL_ARG(redlock_link_handle_reply_value(NULL, 1, reply, 1));
    NUL_ARG(redlock_link_handle_reply_value(link, 1, NULL, 1));
    NUL_ARG(redlock_link_handle_timeout(NULL, 1));
    NUL_ARG(redlock_link_poll_output(NULL, &kind));
    NUL_ARG(redlock_link_poll_output(link, NULL));
    NUL_ARG(redlock_link_write(NULL, &id, &argc));
    NUL_ARG(redlock_link_write(link, NULL, &argc));
    NUL_ARG(redlock_link_write(link, &id, NULL));
    NUL_ARG(redlock_link_write_arg(NULL, 0, &ptr, &n));
    NUL_ARG(redlock_link_write_arg(link, 0, NULL, &n));
    NUL_ARG(redlock_link_write_arg(link, 0, &ptr, NULL));
    NUL_ARG(redlock_link_write_args(NULL, ptrs, lens, 8, &n));
    NUL_ARG(redlock_link_write_args(link, NULL, lens, 8, &n));
    NUL_ARG(redlock_link_write_args(link, ptrs, NULL, 8, &n));
    NUL_ARG(redlock_link_write_args(link, ptrs, lens, 8, NULL));
    NUL_ARG(redlock_link_write_resp(NULL, &ptr, &n));
    NUL_ARG(redlock_link_write_resp(link, NULL, &n));
    NUL_ARG(redlock_link_write_resp(link, &ptr, NULL));
    NUL_ARG(redlock_link_delivery(NULL, &tag, &request, &u32, &integer, &ptr, &n));
    NUL_ARG(redlock_link_delivery(link, NULL, &request, &u32, &integer, &ptr, &n));
    NUL_ARG(redlock_link_delivery(link, &tag, NULL, &u32, &integer, &ptr, &n));
    NUL_ARG(redlock_link_delivery(link, &tag, &request, NULL, &integer, &ptr, &n));
    NUL_ARG(redlock_link_delivery(link, &tag, &request, &u32, NULL, &ptr, &n));
    NUL_ARG(redlock_link_delivery(link, &tag, &request, &u32, &integer, NULL, &n));
    NUL_ARG(redlock_link_delivery(link, &tag, &request, &u32, &integer, &ptr, NULL));
    NUL_ARG(redlock_link_delivery_reply(NULL, &reply));
    NUL_ARG(redlock_link_delivery_reply(link, NULL));
    NUL_ARG(redlock_link_poll_timeout(NULL, &flag, &u64));
    NUL_ARG(redlock_link_poll_timeout(link, NULL, &u64));
    NUL_ARG(redlock_link_poll_timeout(link, &flag, NULL));
    CHECK(redlock_link_is_idle(NULL) && !redlock_link_is_stalled(NULL, 1));
    CHECK(!redlock_link_is_open(NULL) && redlock_link_in_flight(NULL) == 0);
    CHECK(redlock_link_queued(NULL) == 0 && redlock_link_owed(NULL) == 0);
    NUL_ARG(redlock_link_set_connect_timeout(NULL, 500));
    CHECK(redlock_link_connect_timeout_ms(NULL) == 0);
    CHECK(redlock_link_connect_timeout_ms(link) == redlock_connect_timeout_default_ms());

    /* A connection attempt is given up at the connect timeout (0 counts as 1 ms). */
    {
        redlock_link *slow = NULL;
        redlock_operation *first = NULL;
        OK(redlock_link_new(&slow));
        OK(redlock_link_set_connect_timeout(slow, 0));
        CHECK(redlock_link_connect_timeout_ms(slow) == 1);
        OK(redlock_link_set_connect_timeout(slow, 500));
        CHECK(redlock_link_connect_timeout_ms(slow) == 500);
        OK(redlock_client_acquire(client, ONE, ONE_LEN, 1, 1000, &first));
        OK(redlock_operation_poll_output(first, &kind));
        OK(redlock_link_submit_current(slow, 1, first, 1000));
        OK(redlock_link_poll_output(slow, &kind));
        CHECK(kind == REDLOCK_LINK_OUTPUT_CONNECT);
        OK(redlock_link_poll_timeout(slow, &flag, &u64));
        CHECK(flag && u64 <= 1000 + 500000);
        OK(redlock_link_handle_timeout(slow, 1000 + 500000 - 1));
        OK(redlock_link_poll_output(slow, &kind));
        CHECK(kind == REDLOCK_LINK_OUTPUT_NONE);
        OK(redlock_link_handle_timeout(slow, 1000 + 500000));
        OK(redlock_link_poll_output(slow, &kind));
        CHECK(kind == REDLOCK_LINK_OUTPUT_CLOSE && !redlock_link_is_open(slow));
        redlock_operation_free(first);
        redlock_link_free(slow);
    }

    /* Nothing polled yet: the accessors have no value and write nothing. */
    OK(redlock_link_poll_output(link, &kind));
    CHECK(kind == REDLOCK_LINK_OUTPUT_NONE);
    EXPECT(redlock_link_write(link, &id, &argc), REDLOCK_NO_VALUE);
    EXPECT(redlock_link_write_arg(link, 0, &ptr, &n), REDLOCK_NO_VALUE);
    EXPECT(redlock_link_write_args(link, ptrs, lens, 8, &n), REDLOCK_NO_VALUE);
    EXPECT(redlock_link_write_resp(link, &ptr, &n), REDLOCK_NO_VALUE);
    EXPECT(redlock_link_delivery(link, &tag, &request, &u32, &integer, &ptr, &n),
           REDLOCK_NO_VALUE);
    EXPECT(redlock_link_delivery_reply(link, &reply), REDLOCK_NO_VALUE);
    EXPECT(redlock_operation_handle_delivery(op, link, 1000), REDLOCK_NO_VALUE);
    CHECK(id == 7 && argc == 7 && tag == 7 && n == 7 && ptr == buf && reply == NULL);
    OK(redlock_link_poll_timeout(link, &flag, &u64));
    CHECK(!flag && u64 == 0);
    CHECK(redlock_link_is_idle(link));
    /* No send polled from the operation yet. */
    EXPECT(redlock_link_submit_current(link, 1, op, 1000), REDLOCK_NO_VALUE);

    /* One SET, submitted once: the link asks for a connection. */
    OK(redlock_operation_poll_output(op, &kind));
    CHECK(kind == REDLOCK_OUTPUT_SEND);
    OK(redlock_link_submit_current(link, 42, op, 1000));
    EXPECT(redlock_link_submit_current(link, 42, op, 1000), REDLOCK_NO_VALUE);
    OK(redlock_link_poll_output(link, &kind));
    CHECK(kind == REDLOCK_LINK_OUTPUT_CONNECT);
    OK(redlock_link_poll_output(link, &kind));
    CHECK(kind == REDLOCK_LINK_OUTPUT_NONE);
    CHECK(redlock_link_queued(link) == 1 && !redlock_link_is_open(link));
    OK(redlock_operation_poll_output(op, &kind));
    CHECK(kind == REDLOCK_OUTPUT_WAIT);
    /* Connected: three SCRIPT LOADs, then the SET. */
    OK(redlock_link_handle_connected(link, 1100));
    CHECK(redlock_link_is_open(link));
    uint64_t set_id = 0;
    for (int i = 0; i < 4; i++) {
        OK(redlock_link_poll_output(link, &kind));
        CHECK(kind == REDLOCK_LINK_OUTPUT_WRITE);
        OK(redlock_link_write(link, &id, &argc));
        OK(redlock_link_write_arg(link, 0, &ptr, &n));
        if (i < 3) {
            CHECK(argc == 3 && n == 6 && memcmp(ptr, "SCRIPT", 6) == 0);
            OK(redlock_link_handle_reply(link, id, REDLOCK_REPLY_BULK, 0,
                                         (const uint8_t *)"sha", 3, 1150));
        } else {
            CHECK(n == 3 && memcmp(ptr, "SET", 3) == 0);
            set_id = id;
        }
        EXPECT(redlock_link_write_arg(link, argc, &ptr, &n), REDLOCK_OUT_OF_RANGE);
        EXPECT(redlock_link_write_args(link, ptrs, lens, argc - 1, &n), REDLOCK_BUFFER_TOO_SMALL);
        OK(redlock_link_write_args(link, ptrs, lens, 8, &n));
        CHECK(n == argc);
        const uint8_t *resp;
        size_t resp_len;
        OK(redlock_link_write_resp(link, &resp, &resp_len));
        CHECK(resp_len > 4 && resp[0] == '*');
        EXPECT(redlock_link_delivery(link, &tag, &request, &u32, &integer, &ptr, &n),
               REDLOCK_NO_VALUE);
    }
    CHECK(redlock_link_in_flight(link) == 1 && !redlock_link_is_idle(link));
    OK(redlock_link_poll_timeout(link, &flag, &u64));
    CHECK(flag && u64 > 1100);
    CHECK(!redlock_link_is_stalled(link, 1200));
    /* The reply goes back as a delivery tagged 42, and on to the operation. */
    OK(redlock_reply_new(REDLOCK_REPLY_OK, 0, NULL, 0, &reply));
    OK(redlock_link_handle_reply_value(link, set_id, reply, 1200));
    redlock_reply_free(reply);
    reply = NULL;
    OK(redlock_link_poll_output(link, &kind));
    CHECK(kind == REDLOCK_LINK_OUTPUT_DELIVER);
    EXPECT(redlock_link_write(link, &id, &argc), REDLOCK_NO_VALUE);
    OK(redlock_link_delivery(link, &tag, &request, &u32, &integer, &ptr, &n));
    CHECK(tag == 42 && request == 1 && u32 == REDLOCK_REPLY_OK && integer == 0 && n == 0);
    OK(redlock_link_delivery_reply(link, &reply));
    CHECK(redlock_reply_kind(reply) == REDLOCK_REPLY_OK);
    redlock_reply_free(reply);
    OK(redlock_operation_handle_delivery(op, link, 1200));
    EXPECT(redlock_operation_handle_delivery(op, link, 1200), REDLOCK_DUPLICATE_REPLY);
    CHECK(redlock_link_is_idle(link));
    OK(redlock_operation_poll_output(op, &kind));
    CHECK(kind == REDLOCK_OUTPUT_OUTCOME);
    redlock_outcome *outcome = NULL;
    OK(redlock_operation_take_outcome(op, &outcome));
    CHECK(redlock_outcome_error_class(outcome) == 0);
    OK(redlock_outcome_node_cause(outcome, 0, &u32));
    CHECK(u32 == 0);
    u32 = 7;
    NUL_ARG(redlock_outcome_node_cause(NULL, 0, &u32));
    NUL_ARG(redlock_outcome_node_cause(outcome, 0, NULL));
    EXPECT(redlock_outcome_node_cause(outcome, 1, &u32), REDLOCK_OUT_OF_RANGE);
    CHECK(u32 == 7 && redlock_outcome_error_class(NULL) == 0);
    redlock_lease *lease = NULL;
    OK(redlock_outcome_lease(outcome, &lease));
    redlock_outcome_free(outcome);
    redlock_operation_free(op);
    NUL_ARG(redlock_lease_key_ttl_ms(NULL, &u64));
    NUL_ARG(redlock_lease_key_ttl_ms(lease, NULL));
    OK(redlock_lease_key_ttl_ms(lease, &u64));
    CHECK(u64 == 10000);

    /* A second acquisition abandoned while its SET is out: its release follows. */
    OK(redlock_client_acquire(client, ONE, ONE_LEN, 1, 2000, &op));
    OK(redlock_operation_poll_output(op, &kind));
    OK(redlock_link_submit_current(link, 43, op, 2000));
    OK(redlock_operation_poll_output(op, &kind));
    CHECK(kind == REDLOCK_OUTPUT_WAIT);
    OK(redlock_operation_abandon(op, 2100));
    OK(redlock_operation_poll_output(op, &kind));
    CHECK(kind == REDLOCK_OUTPUT_SEND);
    uint32_t command_kind;
    OK(redlock_operation_command_kind(op, &command_kind, &flag));
    CHECK(command_kind == REDLOCK_COMMAND_RELEASE);
    OK(redlock_link_submit_current(link, 43, op, 2100));
    OK(redlock_operation_poll_output(op, &kind));
    CHECK(kind == REDLOCK_OUTPUT_NONE && redlock_operation_is_finished(op));
    CHECK(redlock_link_in_flight(link) == 2);
    /* The connection closes: the SET fails (delivered), the release is written again. */
    OK(redlock_link_poll_output(link, &kind));
    OK(redlock_link_poll_output(link, &kind));
    OK(redlock_link_poll_output(link, &kind));
    CHECK(kind == REDLOCK_LINK_OUTPUT_NONE);
    OK(redlock_link_handle_closed(link, REDLOCK_LINK_CAUSE_CLOSED, (const uint8_t *)"\xff", 1,
                                  2200));
    OK(redlock_link_poll_output(link, &kind));
    CHECK(kind == REDLOCK_LINK_OUTPUT_DELIVER);
    OK(redlock_link_delivery(link, &tag, &request, &u32, &integer, &ptr, &n));
    CHECK(tag == 43 && u32 == REDLOCK_REPLY_CONNECTION_FAILED && n > 7 &&
          memcmp(ptr, "closed: ", 8) == 0);
    OK(redlock_link_poll_output(link, &kind));
    CHECK(kind == REDLOCK_LINK_OUTPUT_CONNECT);
    CHECK(redlock_link_queued(link) == 1);
    OK(redlock_link_handle_timeout(link, 2300));
    redlock_operation_free(op);

    /* Keep-alive. */
    redlock_keepalive *ka = NULL;
    NUL_ARG(redlock_keepalive_new(NULL, lease, &ka));
    NUL_ARG(redlock_keepalive_new(client, NULL, &ka));
    NUL_ARG(redlock_keepalive_new(client, lease, NULL));
    OK(redlock_keepalive_new(client, lease, &ka));
    NUL_ARG(redlock_keepalive_poll(NULL, 1, &u32, &u64, &reason));
    NUL_ARG(redlock_keepalive_poll(ka, 1, NULL, &u64, &reason));
    NUL_ARG(redlock_keepalive_poll(ka, 1, &u32, NULL, &reason));
    NUL_ARG(redlock_keepalive_poll(ka, 1, &u32, &u64, NULL));
    NUL_ARG(redlock_keepalive_handle_outcome(NULL, NULL, 1));
    NUL_ARG(redlock_keepalive_handle_outcome(ka, NULL, 1));
    NUL_ARG(redlock_keepalive_handle_failure(NULL, 1));
    NUL_ARG(redlock_keepalive_stop(NULL));
    NUL_ARG(redlock_keepalive_lease(NULL, &lease));
    NUL_ARG(redlock_keepalive_lease(ka, NULL));
    CHECK(redlock_keepalive_lost_reason(NULL) == 0 && !redlock_keepalive_is_extending(NULL));
    OK(redlock_keepalive_poll(ka, 1300, &u32, &u64, &reason));
    CHECK(u32 == REDLOCK_KEEPALIVE_WAIT && u64 > 1300 && reason == 0);
    uint64_t due = u64;
    OK(redlock_keepalive_poll(ka, due, &u32, &u64, &reason));
    CHECK(u32 == REDLOCK_KEEPALIVE_EXTEND && u64 == 0 && redlock_keepalive_is_extending(ka));
    /* The driver could not run it: retried later, not lost. */
    OK(redlock_keepalive_handle_failure(ka, due));
    OK(redlock_keepalive_poll(ka, due, &u32, &u64, &reason));
    CHECK(u32 == REDLOCK_KEEPALIVE_WAIT && u64 > due && redlock_keepalive_lost_reason(ka) == 0);
    redlock_lease *current = NULL;
    OK(redlock_keepalive_lease(ka, &current));
    CHECK(redlock_lease_valid_until(current) == redlock_lease_valid_until(lease));
    redlock_lease_free(current);
    /* Past the lease: lost, for good. */
    OK(redlock_keepalive_poll(ka, redlock_lease_valid_until(lease), &u32, &u64, &reason));
    CHECK(u32 == REDLOCK_KEEPALIVE_LOST && reason == REDLOCK_LOST_EXPIRED);
    CHECK(redlock_keepalive_lost_reason(ka) == REDLOCK_LOST_EXPIRED);
    CHECK(strcmp(redlock_lost_reason_name(reason), "expired") == 0);
    CHECK(redlock_lost_reason_name(0) == NULL && redlock_lost_reason_name(5) == NULL);
    OK(redlock_keepalive_stop(ka));
    OK(redlock_keepalive_poll(ka, 1, &u32, &u64, &reason));
    CHECK(u32 == REDLOCK_KEEPALIVE_LOST);
    redlock_keepalive_free(ka);
    OK(redlock_keepalive_new(client, lease, &ka));
    OK(redlock_keepalive_stop(ka));
    OK(redlock_keepalive_poll(ka, 1, &u32, &u64, &reason));
    CHECK(u32 == REDLOCK_KEEPALIVE_STOPPED && reason == 0);
    redlock_keepalive_free(ka);

    /* Error classes and causes by number. */
    CHECK(strcmp(redlock_error_class_name(REDLOCK_ERROR_CLASS_USED_AFTER_CLOSE),
                 "used_after_close") == 0);
    CHECK(redlock_error_class_name(0) == NULL && redlock_error_class_name(8) == NULL);
    CHECK(strcmp(redlock_node_cause_name(REDLOCK_NODE_CAUSE_STALLED), "stalled") == 0);
    CHECK(redlock_node_cause_name(0) == NULL && redlock_node_cause_name(8) == NULL);
    CHECK(redlock_result_error_class(REDLOCK_INVALID_TTL) == REDLOCK_ERROR_CLASS_INVALID_ARGUMENT);
    CHECK(redlock_result_error_class(REDLOCK_CONFIG_RETRY_DELAY_TOO_SHORT) ==
          REDLOCK_ERROR_CLASS_INVALID_ARGUMENT);
    CHECK(redlock_result_error_class(REDLOCK_OK) == 0);
    CHECK(redlock_result_error_class(REDLOCK_PROTOCOL_BAD_NUMBER) == 0);

    /* Duplicate nodes. */
    const uint8_t *addresses[] = {(const uint8_t *)"redis://a:1", (const uint8_t *)"b:1",
                                  (const uint8_t *)"redis://:pw@A:1/2", (const uint8_t *)"\xff"};
    size_t address_lens[] = {11, 3, 17, 1};
    NUL_ARG(redlock_duplicate_node(NULL, address_lens, 2, &found, &first, &second));
    NUL_ARG(redlock_duplicate_node(addresses, NULL, 2, &found, &first, &second));
    NUL_ARG(redlock_duplicate_node(addresses, address_lens, 2, NULL, &first, &second));
    NUL_ARG(redlock_duplicate_node(addresses, address_lens, 2, &found, NULL, &second));
    NUL_ARG(redlock_duplicate_node(addresses, address_lens, 2, &found, &first, NULL));
    EXPECT(redlock_duplicate_node(addresses, address_lens, 4, &found, &first, &second),
           REDLOCK_INVALID_INPUT);
    CHECK(found && first == 7 && second == 7);
    OK(redlock_duplicate_node(addresses, address_lens, 2, &found, &first, &second));
    CHECK(!found && first == 0 && second == 0);
    OK(redlock_duplicate_node(addresses, address_lens, 3, &found, &first, &second));
    CHECK(found && first == 0 && second == 2);
    OK(redlock_duplicate_node(NULL, NULL, 0, &found, &first, &second));
    CHECK(!found);

    redlock_lease_free(lease);
    redlock_link_free(link);
    redlock_client_free(client);
    redlock_config_free(config);
}

/* Fencing, waiting and the fenced write: NULLs, bad tokens, unknown nodes, short
 * buffers, and every result of a fenced write's reply. */
static void fencing_and_waiting(void) {
    redlock_config_builder *b = NULL;
    OK(redlock_config_builder_new(5, 10000, &b));
    EXPECT(redlock_config_builder_set_fencing(NULL, true), REDLOCK_NULL_PARAMETER);
    OK(redlock_config_builder_set_fencing(b, true));
    redlock_config *config = NULL;
    OK(redlock_config_builder_build(b, &config));
    redlock_config_builder_free(b);
    CHECK(redlock_config_fencing(config) && !redlock_config_fencing(NULL));

    redlock_client *client = NULL;
    OK(redlock_client_new(config, &client));
    const uint8_t *resources[] = {(const uint8_t *)"res"};
    const size_t lens[] = {3};
    redlock_operation *op = (redlock_operation *)0x1;
    EXPECT(redlock_client_acquire_with(NULL, resources, lens, 1, 0, true, 1000, 0, &op),
           REDLOCK_NULL_PARAMETER);
    EXPECT(redlock_client_acquire_with(client, resources, lens, 1, 0, true, 1000, 0, NULL),
           REDLOCK_NULL_PARAMETER);
    EXPECT(redlock_client_acquire_with(client, resources, lens, 0, 0, true, 1000, 0, &op),
           REDLOCK_NO_RESOURCES);
    CHECK(op == (redlock_operation *)0x1);
    EXPECT(redlock_client_acquire_with(client, resources, lens, 1, 1, true, 1000, 0, &op),
           REDLOCK_INVALID_TTL);
    EXPECT(redlock_client_acquire_with_random_options(client, resources, lens, 1, 0, true, 1000,
                                                       (const uint8_t *)"short", 5, 0, &op),
           REDLOCK_NOT_ENOUGH_RANDOM_BYTES);
    OK(redlock_client_acquire_with(client, resources, lens, 1, 0, true, 2000000, 1000, &op));
    /* The first attempt of a fenced acquisition is the fenced script on every node. */
    uint32_t kind = 0, command_kind = 0;
    bool is_eval = true;
    OK(redlock_operation_poll_output(op, &kind));
    CHECK(kind == REDLOCK_OUTPUT_SEND);
    OK(redlock_operation_command_kind(op, &command_kind, &is_eval));
    CHECK(command_kind == REDLOCK_COMMAND_FENCED_ACQUIRE && !is_eval);
    /* Notices: node indices are checked; the channel is the key's. */
    EXPECT(redlock_operation_handle_notice(op, 5, 2000), REDLOCK_UNKNOWN_NODE);
    EXPECT(redlock_operation_handle_notice(NULL, 0, 2000), REDLOCK_NULL_PARAMETER);
    OK(redlock_operation_handle_notice(op, 4, 2000));
    EXPECT(redlock_operation_handle_subscribed(op, 5, 2000), REDLOCK_UNKNOWN_NODE);
    EXPECT(redlock_operation_handle_subscribed(NULL, 0, 2000), REDLOCK_NULL_PARAMETER);
    OK(redlock_operation_handle_subscribed(op, 4, 2000));
    EXPECT(redlock_operation_handle_notice_message(op, 5, (const uint8_t *)"w", 1, 2000),
           REDLOCK_UNKNOWN_NODE);
    EXPECT(redlock_operation_handle_notice_message(NULL, 0, (const uint8_t *)"w", 1, 2000),
           REDLOCK_NULL_PARAMETER);
    EXPECT(redlock_operation_handle_notice_message(op, 0, NULL, 3, 2000), REDLOCK_NULL_PARAMETER);
    OK(redlock_operation_handle_notice_message(op, 3, NULL, 0, 2000));
    OK(redlock_operation_handle_notice_message(op, 2, (const uint8_t *)"someone", 7, 2000));
    CHECK(redlock_operation_notice_channel_count(op) == 1);
    CHECK(redlock_operation_notice_channel_count(NULL) == 0);
    /* Nothing refused it because the key is held: it does not listen yet. A second wait
       for the resource a moment later listens from its start (its channels linger). */
    CHECK(!redlock_operation_listens(op) && !redlock_operation_listens(NULL));
    redlock_operation *again = NULL;
    OK(redlock_client_acquire_with(client, resources, lens, 1, 0, true, 2000000, 2000, &again));
    CHECK(redlock_operation_listens(again));
    redlock_operation_free(again);
    uint8_t channel[64];
    size_t channel_len = 0;
    EXPECT(redlock_operation_notice_channel(op, 0, channel, 4, &channel_len), REDLOCK_BUFFER_TOO_SMALL);
    CHECK(channel_len == 20);
    EXPECT(redlock_operation_notice_channel(op, 0, NULL, sizeof channel, &channel_len),
           REDLOCK_NULL_PARAMETER);
    EXPECT(redlock_operation_notice_channel(op, 1, channel, sizeof channel, &channel_len),
           REDLOCK_OUT_OF_RANGE);
    OK(redlock_operation_notice_channel(op, 0, channel, sizeof channel, &channel_len));
    CHECK(channel_len == 20 && memcmp(channel, "redlock:released:res", 20) == 0);
    OK(redlock_operation_abandon(op, 3000));
    CHECK(redlock_operation_notice_channel_count(op) == 0);
    redlock_operation_free(op);
    uint64_t fence = 77;
    EXPECT(redlock_outcome_fencing_token(NULL, &fence), REDLOCK_NULL_PARAMETER);
    EXPECT(redlock_lease_fencing_token(NULL, &fence), REDLOCK_NULL_PARAMETER);
    CHECK(fence == 77);
    redlock_client_free(client);
    redlock_config_free(config);

    /* The fenced write. */
    redlock_fenced_set *w = (redlock_fenced_set *)0x1;
    EXPECT(redlock_fenced_set_new((const uint8_t *)"item", 4, (const uint8_t *)"v", 1, 0, &w),
           REDLOCK_INVALID_FENCING_TOKEN);
    EXPECT(redlock_fenced_set_new((const uint8_t *)"item", 4, (const uint8_t *)"v", 1,
                                  REDLOCK_MAX_FENCING_TOKEN + 1, &w),
           REDLOCK_INVALID_FENCING_TOKEN);
    EXPECT(redlock_fenced_set_new((const uint8_t *)"", 0, (const uint8_t *)"v", 1, 7, &w),
           REDLOCK_EMPTY_RESOURCE);
    EXPECT(redlock_fenced_set_new(NULL, 4, (const uint8_t *)"v", 1, 7, &w), REDLOCK_NULL_PARAMETER);
    CHECK(w == (redlock_fenced_set *)0x1);
    OK(redlock_fenced_set_new((const uint8_t *)"item", 4, (const uint8_t *)"v", 1, 7, &w));
    const uint8_t *args[7];
    size_t arg_lens[7], argc = 0;
    EXPECT(redlock_fenced_set_args(w, false, args, arg_lens, 6, &argc), REDLOCK_BUFFER_TOO_SMALL);
    EXPECT(redlock_fenced_set_args(w, false, NULL, arg_lens, 7, &argc), REDLOCK_NULL_PARAMETER);
    OK(redlock_fenced_set_args(w, false, args, arg_lens, 7, &argc));
    CHECK(argc == 7 && arg_lens[0] == 7 && memcmp(args[0], "EVALSHA", 7) == 0 &&
          arg_lens[4] == 21 && memcmp(args[4], "{item}:fence:accepted", 21) == 0 &&
          arg_lens[5] == 1 && args[5][0] == '7');
    OK(redlock_fenced_set_args(w, true, args, arg_lens, 7, &argc));
    CHECK(argc == 7 && arg_lens[0] == 4 && memcmp(args[0], "EVAL", 4) == 0);
    CHECK(redlock_fenced_set_result(w) == REDLOCK_FENCED_PENDING);
    CHECK(redlock_fenced_set_result(NULL) == REDLOCK_FENCED_PENDING);
    uint64_t seen = 0;
    EXPECT(redlock_fenced_set_seen(w, &seen), REDLOCK_NO_VALUE);
    /* {0, 9}: stale, seen 9. */
    redlock_reply *array = NULL, *zero = NULL, *nine = NULL, *seven = NULL, *one = NULL;
    OK(redlock_reply_new(REDLOCK_REPLY_ARRAY, 0, NULL, 0, &array));
    OK(redlock_reply_new(REDLOCK_REPLY_INTEGER, 0, NULL, 0, &zero));
    OK(redlock_reply_new(REDLOCK_REPLY_INTEGER, 9, NULL, 0, &nine));
    OK(redlock_reply_array_push(array, zero));
    OK(redlock_reply_array_push(array, nine));
    uint32_t result = 99;
    EXPECT(redlock_fenced_set_handle_reply(w, NULL, &result), REDLOCK_NULL_PARAMETER);
    CHECK(result == 99);
    OK(redlock_fenced_set_handle_reply(w, array, &result));
    CHECK(result == REDLOCK_FENCED_STALE && redlock_fenced_set_result(w) == REDLOCK_FENCED_STALE);
    OK(redlock_fenced_set_seen(w, &seen));
    CHECK(seen == 9);
    redlock_reply_free(array);
    /* {1, 7}: accepted. */
    OK(redlock_reply_new(REDLOCK_REPLY_ARRAY, 0, NULL, 0, &array));
    OK(redlock_reply_new(REDLOCK_REPLY_INTEGER, 1, NULL, 0, &one));
    OK(redlock_reply_new(REDLOCK_REPLY_INTEGER, 7, NULL, 0, &seven));
    OK(redlock_reply_array_push(array, one));
    OK(redlock_reply_array_push(array, seven));
    OK(redlock_fenced_set_handle_reply(w, array, &result));
    CHECK(result == REDLOCK_FENCED_ACCEPTED);
    EXPECT(redlock_fenced_set_seen(w, &seen), REDLOCK_NO_VALUE);
    redlock_reply_free(array);
    /* NOSCRIPT: retry as EVAL; another error: failed, with its text. */
    redlock_reply *error = NULL;
    OK(redlock_reply_new(REDLOCK_REPLY_ERROR, 0, (const uint8_t *)"NOSCRIPT No matching script.", 28,
                         &error));
    OK(redlock_fenced_set_handle_reply(w, error, &result));
    CHECK(result == REDLOCK_FENCED_RETRY_AS_EVAL);
    redlock_reply_free(error);
    OK(redlock_reply_new(REDLOCK_REPLY_ERROR, 0, (const uint8_t *)"ERR boom", 8, &error));
    OK(redlock_fenced_set_handle_reply(w, error, &result));
    CHECK(result == REDLOCK_FENCED_FAILED);
    const uint8_t *text = NULL;
    size_t text_len = 0;
    OK(redlock_fenced_set_failure(w, &text, &text_len));
    CHECK(text_len == 8 && memcmp(text, "ERR boom", 8) == 0);
    redlock_reply_free(error);
    /* A bare integer is no fenced write's reply. */
    OK(redlock_fenced_set_handle_reply(w, one, &result));
    CHECK(result == REDLOCK_FENCED_FAILED);
    redlock_reply_free(zero);
    redlock_reply_free(nine);
    redlock_reply_free(one);
    redlock_reply_free(seven);
    redlock_fenced_set_free(w);
    redlock_fenced_set_free(NULL);

    /* Inspection: usage errors, NULLs, and one whole inspection on one node. */
    redlock_config *single = make_config(1, 10000);
    redlock_client *reader = NULL;
    OK(redlock_client_new(single, &reader));
    redlock_operation *inspect = (redlock_operation *)0x1;
    EXPECT(redlock_client_inspect(reader, resources, lens, 0, 0, &inspect), REDLOCK_NO_RESOURCES);
    EXPECT(redlock_client_inspect(NULL, resources, lens, 1, 0, &inspect), REDLOCK_NULL_PARAMETER);
    CHECK(inspect == (redlock_operation *)0x1);
    OK(redlock_client_inspect(reader, resources, lens, 1, 0, &inspect));
    CHECK(redlock_operation_kind(inspect) == REDLOCK_OPERATION_INSPECT);
    OK(redlock_operation_poll_output(inspect, &kind));
    OK(redlock_operation_command_kind(inspect, &command_kind, &is_eval));
    CHECK(command_kind == REDLOCK_COMMAND_INSPECT && !is_eval);
    OK(redlock_operation_handle_reply(inspect, 1, REDLOCK_REPLY_BULK, 0, (const uint8_t *)"tok", 3,
                                      100));
    OK(redlock_operation_poll_output(inspect, &kind));
    CHECK(kind == REDLOCK_OUTPUT_OUTCOME);
    redlock_outcome *seen_outcome = NULL;
    OK(redlock_operation_take_outcome(inspect, &seen_outcome));
    CHECK(redlock_outcome_kind(seen_outcome) == REDLOCK_OUTCOME_INSPECTED);
    CHECK(redlock_outcome_is_locked(seen_outcome) && !redlock_outcome_is_locked(NULL));
    const uint8_t *holder = NULL;
    size_t holder_len = 0;
    EXPECT(redlock_outcome_holder(seen_outcome, NULL, &holder_len), REDLOCK_NULL_PARAMETER);
    OK(redlock_outcome_holder(seen_outcome, &holder, &holder_len));
    CHECK(holder_len == 3 && memcmp(holder, "tok", 3) == 0);
    redlock_lease *mine = NULL, *theirs = NULL;
    OK(redlock_client_lease(reader, resources, lens, 1, (const uint8_t *)"tok", 3, 5000, &mine));
    OK(redlock_client_lease(reader, resources, lens, 1, (const uint8_t *)"other", 5, 5000, &theirs));
    CHECK(redlock_outcome_is_held_by(seen_outcome, mine, 200));
    CHECK(!redlock_outcome_is_held_by(seen_outcome, mine, 5000));
    CHECK(!redlock_outcome_is_held_by(seen_outcome, theirs, 200));
    CHECK(!redlock_outcome_is_held_by(seen_outcome, NULL, 200));
    CHECK(!redlock_outcome_is_held_by(NULL, mine, 200));
    redlock_lease_free(mine);
    redlock_lease_free(theirs);
    redlock_outcome_free(seen_outcome);
    redlock_operation_free(inspect);
    redlock_client_free(reader);
    redlock_config_free(single);
}

/* Events: names, NULLs, and the events of one acquisition on one node that fails. */
static void events(void) {
    CHECK(strcmp(redlock_event_kind_name(REDLOCK_EVENT_RETRY), "retry") == 0);
    CHECK(strcmp(redlock_event_kind_name(REDLOCK_EVENT_NODE_FAILED), "node_failed") == 0);
    CHECK(redlock_event_kind_name(0) == NULL && redlock_event_kind_name(99) == NULL);
    uint32_t kind = 0;
    EXPECT(redlock_operation_poll_event(NULL, &kind), REDLOCK_NULL_PARAMETER);
    redlock_config *config = make_config(1, 10000);
    redlock_client *client = NULL;
    OK(redlock_client_new(config, &client));
    const uint8_t *resources[] = {(const uint8_t *)"ev"};
    const size_t lens[] = {2};
    redlock_operation *op = NULL;
    OK(redlock_client_acquire(client, resources, lens, 1, 1000, &op));
    EXPECT(redlock_operation_poll_event(op, NULL), REDLOCK_NULL_PARAMETER);
    EXPECT(redlock_operation_poll_event(op, &kind), REDLOCK_NO_VALUE);
    uint64_t at = 0, elapsed = 0;
    uint32_t attempt = 0, operation_kind = 0, reason = 0;
    EXPECT(redlock_operation_event(op, &at, &elapsed, &attempt, &operation_kind), REDLOCK_NO_VALUE);
    OK(redlock_operation_poll_output(op, &kind));
    OK(redlock_operation_handle_reply(op, 1, REDLOCK_REPLY_ERROR, 0, (const uint8_t *)"ERR x", 5,
                                      1500));
    OK(redlock_operation_poll_event(op, &kind));
    CHECK(kind == REDLOCK_EVENT_NODE_FAILED);
    OK(redlock_operation_event(op, &at, &elapsed, &attempt, &operation_kind));
    CHECK(at == 1500 && elapsed == 500 && attempt == 1 &&
          operation_kind == REDLOCK_OPERATION_ACQUIRE);
    size_t node = 99;
    uint32_t cause = 0;
    OK(redlock_operation_event_node(op, &node, &cause));
    CHECK(node == 0 && cause == REDLOCK_NODE_CAUSE_ERROR);
    CHECK(redlock_operation_event_node_count(op) == 1);
    const uint8_t *text = NULL;
    size_t text_len = 0;
    uint32_t node_kind = 0;
    OK(redlock_operation_event_node_result(op, 0, &node_kind, &text, &text_len));
    CHECK(node_kind == REDLOCK_NODE_ERROR && text_len == 5 && memcmp(text, "ERR x", 5) == 0);
    EXPECT(redlock_operation_event_node_result(op, 1, &node_kind, &text, &text_len),
           REDLOCK_OUT_OF_RANGE);
    EXPECT(redlock_operation_event_reason(op, &reason), REDLOCK_NO_VALUE);
    uint64_t retry_at = 0;
    EXPECT(redlock_operation_event_retry_at(op, &retry_at), REDLOCK_NO_VALUE);
    /* The failed attempt's cleanup; when it answers, a retry is scheduled. */
    while (redlock_operation_poll_output(op, &kind) == REDLOCK_OK && kind == REDLOCK_OUTPUT_SEND) {
        size_t n, argc;
        uint64_t request, deadline;
        OK(redlock_operation_command(op, &n, &request, &deadline, &argc));
        OK(redlock_operation_handle_reply(op, request, REDLOCK_REPLY_INTEGER, 0, NULL, 0, 1600));
    }
    OK(redlock_operation_poll_event(op, &kind));
    CHECK(kind == REDLOCK_EVENT_RETRY);
    OK(redlock_operation_event_reason(op, &reason));
    CHECK(reason == REDLOCK_REASON_NODES_FAILED);
    OK(redlock_operation_event_retry_at(op, &retry_at));
    CHECK(retry_at > 1600);
    EXPECT(redlock_operation_event_node(op, &node, &cause), REDLOCK_NO_VALUE);
    CHECK(redlock_operation_event_node_count(op) == 1);
    EXPECT(redlock_operation_poll_event(op, &kind), REDLOCK_NO_VALUE);
    CHECK(redlock_operation_event_node_count(op) == 0 && redlock_operation_event_node_count(NULL) == 0);
    redlock_operation_free(op);
    redlock_client_free(client);
    redlock_config_free(config);
}

/* Notice subscriptions: bad handles, nodes and channels get codes; a short drive. */
static void subscriptions(void) {
    redlock_subscriptions *subs = NULL;
    EXPECT(redlock_subscriptions_new(0, 150, &subs), REDLOCK_CONFIG_NO_NODES);
    EXPECT(redlock_subscriptions_new(256, 150, &subs), REDLOCK_CONFIG_TOO_MANY_NODES);
    EXPECT(redlock_subscriptions_new(2, 150, NULL), REDLOCK_NULL_PARAMETER);
    CHECK(subs == NULL);
    OK(redlock_subscriptions_new(2, 150, &subs));
    const uint8_t *ch = (const uint8_t *)"redlock:notice:a";
    EXPECT(redlock_subscriptions_want(NULL, ch, 16, 0), REDLOCK_NULL_PARAMETER);
    EXPECT(redlock_subscriptions_want(subs, NULL, 16, 0), REDLOCK_NULL_PARAMETER);
    EXPECT(redlock_subscriptions_unwant(subs, ch, 16, 0), REDLOCK_NO_VALUE);
    OK(redlock_subscriptions_want(subs, ch, 16, 0));
    uint32_t kind = 99;
    size_t node = 99;
    const uint8_t *ptr = NULL;
    size_t len = 0;
    OK(redlock_subscriptions_poll_output(subs, &kind, &node));
    CHECK(kind == REDLOCK_SUBSCRIBER_OUTPUT_OPEN && node == 0);
    EXPECT(redlock_subscriptions_channel(subs, &ptr, &len), REDLOCK_NO_VALUE);
    OK(redlock_subscriptions_poll_output(subs, &kind, &node));
    CHECK(kind == REDLOCK_SUBSCRIBER_OUTPUT_OPEN && node == 1);
    OK(redlock_subscriptions_poll_output(subs, &kind, &node));
    CHECK(kind == REDLOCK_SUBSCRIBER_OUTPUT_NONE);
    EXPECT(redlock_subscriptions_poll_output(subs, NULL, &node), REDLOCK_NULL_PARAMETER);
    EXPECT(redlock_subscriptions_handle_opened(subs, 2, 1000), REDLOCK_UNKNOWN_NODE);
    EXPECT(redlock_subscriptions_handle_lost(subs, 7, 1000), REDLOCK_UNKNOWN_NODE);
    EXPECT(redlock_subscriptions_handle_refused(NULL, 0, 1000), REDLOCK_NULL_PARAMETER);
    OK(redlock_subscriptions_handle_opened(subs, 0, 1000));
    CHECK(redlock_subscriptions_is_open(subs, 0) && !redlock_subscriptions_is_open(subs, 1));
    CHECK(!redlock_subscriptions_is_open(NULL, 0) && !redlock_subscriptions_is_open(subs, 9));
    OK(redlock_subscriptions_poll_output(subs, &kind, &node));
    CHECK(kind == REDLOCK_SUBSCRIBER_OUTPUT_SUBSCRIBE && node == 0);
    OK(redlock_subscriptions_channel(subs, &ptr, &len));
    CHECK(len == 16 && memcmp(ptr, ch, 16) == 0);
    bool counts = false;
    EXPECT(redlock_subscriptions_handle_confirmed(subs, 0, ch, 16, 1500, NULL), REDLOCK_NULL_PARAMETER);
    EXPECT(redlock_subscriptions_handle_confirmed(subs, 5, ch, 16, 1500, &counts), REDLOCK_UNKNOWN_NODE);
    OK(redlock_subscriptions_handle_confirmed(subs, 0, ch, 16, 1500, &counts));
    CHECK(counts);
    OK(redlock_subscriptions_handle_confirmed(subs, 0, ch, 16, 1500, &counts));
    CHECK(!counts);
    /* Node 1 never opens: at 150 ms it is given up (closed, paused). */
    bool due = false;
    uint64_t at = 0;
    OK(redlock_subscriptions_poll_timeout(subs, &due, &at));
    CHECK(due && at == 150000);
    OK(redlock_subscriptions_handle_timeout(subs, 150000));
    OK(redlock_subscriptions_poll_output(subs, &kind, &node));
    CHECK(kind == REDLOCK_SUBSCRIBER_OUTPUT_CLOSE && node == 1);
    OK(redlock_subscriptions_poll_timeout(subs, &due, &at));
    CHECK(due && at == 150000 + 1000 * redlock_subscriber_reopen_first_ms());
    OK(redlock_subscriptions_unwant(subs, ch, 16, 200000));
    CHECK(redlock_subscriptions_channel_count(subs) == 1 && redlock_subscriptions_channel_count(NULL) == 0);
    OK(redlock_subscriptions_handle_timeout(subs, 200000 + 1000 * redlock_notice_channel_linger_ms()));
    OK(redlock_subscriptions_poll_output(subs, &kind, &node));
    CHECK(kind == REDLOCK_SUBSCRIBER_OUTPUT_UNSUBSCRIBE && node == 0);
    OK(redlock_subscriptions_poll_output(subs, &kind, &node));
    CHECK(kind == REDLOCK_SUBSCRIBER_OUTPUT_CLOSE && node == 0);
    CHECK(redlock_subscriptions_channel_count(subs) == 0);
    OK(redlock_subscriptions_poll_timeout(subs, &due, &at));
    CHECK(!due && at == 0);
    redlock_subscriptions_free(subs);
    redlock_subscriptions_free(NULL);
}

int main(void) {
    frees_accept_null();
    links_and_keepalive();
    null_parameters();
    config_errors();
    usage_errors();
    operation_misuse();
    replies_and_decoder();
    buffers_and_texts();
    fencing_and_waiting();
    events();
    subscriptions();
    printf("errors: %d checks of the C ABI's error paths\n", checks);
    printf("%d passed, %d failed\n", checks - failures, failures);
    return failures ? 1 : 0;
}
