/* Acquires a lock on real Redis nodes through the C ABI with plain sockets: the core
 * says what to send (as RESP bytes), the RESP decoder turns what comes back into
 * replies, and the core decides. Then shows that a second client is refused while the
 * lock is held, and releases it on every node.
 *
 *   acquire redis://127.0.0.1:7400 redis://127.0.0.1:7401 ...
 *
 * Exits 0 when the lock was acquired, refused to the second client, and released (it
 * prints on how many nodes: each unreachable one is left to the key's TTL). */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "redlock.h"

#define MAX_NODES 16
#define MAX_IN_FLIGHT 64

/* A request sent on a connection and not yet answered. Replies of an operation that
 * has already finished (a node answering after the quorum decided) still arrive, in
 * order, and are dropped: `operation` tells them apart. */
typedef struct {
    uint64_t operation;
    uint64_t request;
    uint64_t deadline;
} in_flight;

typedef struct {
    int fd; /* -1 when the node cannot be reached */
    redlock_decoder *decoder;
    /* Oldest first: a Redis connection answers in order. */
    in_flight queue[MAX_IN_FLIGHT];
    size_t head, count;
} node;

/* Numbers the operations driven, for `in_flight.operation`. */
static uint64_t current_operation;

/* Takes the oldest request in flight on `nd`; true if it belongs to the current
 * operation (its id is then in `*request`). */
static bool pop_request(node *nd, uint64_t *request) {
    in_flight oldest = nd->queue[nd->head];
    nd->head = (nd->head + 1) % MAX_IN_FLIGHT;
    nd->count--;
    *request = oldest.request;
    return oldest.operation == current_operation;
}

static uint64_t now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static void check(redlock_result rc, const char *what) {
    if (rc != REDLOCK_OK) {
        char message[REDLOCK_MESSAGE_MAX];
        size_t len;
        redlock_result_message(rc, (uint8_t *)message, sizeof message, &len);
        fprintf(stderr, "%s: %s (%s)\n", what, message, redlock_result_name(rc));
        exit(1);
    }
}

/* Connects to redis://host:port (or host:port); -1 on failure. */
static int connect_url(const char *url) {
    char host[256], port[16];
    const char *rest = strncmp(url, "redis://", 8) == 0 ? url + 8 : url;
    const char *colon = strrchr(rest, ':');
    if (!colon || (size_t)(colon - rest) >= sizeof host) return -1;
    snprintf(host, sizeof host, "%.*s", (int)(colon - rest), rest);
    snprintf(port, sizeof port, "%s", colon + 1);
    port[strcspn(port, "/")] = '\0';
    struct addrinfo hints = {0}, *addresses;
    hints.ai_socktype = SOCK_STREAM;
    if (getaddrinfo(host, port, &hints, &addresses) != 0) return -1;
    int fd = -1;
    for (struct addrinfo *a = addresses; a && fd < 0; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype, a->ai_protocol);
        if (fd >= 0 && connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(addresses);
    return fd;
}

static bool write_all(int fd, const uint8_t *bytes, size_t len) {
    while (len > 0) {
        ssize_t n = write(fd, bytes, len);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        bytes += n;
        len -= (size_t)n;
    }
    return true;
}

/* Reports a request the driver could not send or whose connection broke. */
static void fail_request(redlock_operation *op, uint64_t request, const char *why) {
    check(redlock_operation_handle_reply(op, request, REDLOCK_REPLY_CONNECTION_FAILED, 0,
                                        (const uint8_t *)why, strlen(why), now_us()),
          "handle_reply");
}

/* Closes a broken connection; the current operation's requests on it failed. */
static void drop_connection(redlock_operation *op, node *nd, const char *why) {
    close(nd->fd);
    nd->fd = -1;
    while (nd->count > 0) {
        uint64_t request;
        if (pop_request(nd, &request)) fail_request(op, request, why);
    }
}

/* Reads what `nd` sent and hands each reply of the current operation to `op`. */
static void read_replies(redlock_operation *op, node *nd) {
    uint8_t buf[4096];
    ssize_t n = read(nd->fd, buf, sizeof buf);
    if (n <= 0) {
        drop_connection(op, nd, "connection closed");
        return;
    }
    check(redlock_decoder_feed(nd->decoder, buf, (size_t)n), "decoder_feed");
    for (;;) {
        redlock_reply *reply = NULL;
        if (redlock_decoder_next_reply(nd->decoder, &reply) != REDLOCK_OK) {
            /* Not RESP: the connection is out of step and cannot be trusted. */
            drop_connection(op, nd, "protocol error");
            return;
        }
        if (!reply) return;
        uint64_t request;
        if (nd->count > 0 && pop_request(nd, &request))
            check(redlock_operation_handle_reply_value(op, request, reply, now_us()),
                  "handle_reply_value");
        redlock_reply_free(reply);
    }
}

/* Drives `op` to its outcome over the nodes' sockets: the driver loop of the C ABI. */
static redlock_outcome *drive(redlock_operation *op, node *nodes) {
    uint64_t wake_at = 0;
    current_operation++;
    for (;;) {
        uint32_t kind;
        check(redlock_operation_poll_output(op, &kind), "poll_output");
        if (kind == REDLOCK_OUTPUT_SEND) {
            size_t index, argc;
            uint64_t request, deadline;
            const uint8_t *resp;
            size_t resp_len;
            check(redlock_operation_command(op, &index, &request, &deadline, &argc), "command");
            check(redlock_operation_command_resp(op, &resp, &resp_len), "command_resp");
            node *nd = &nodes[index];
            if (nd->fd < 0 || nd->count == MAX_IN_FLIGHT || !write_all(nd->fd, resp, resp_len)) {
                fail_request(op, request, "not connected");
                continue;
            }
            nd->queue[(nd->head + nd->count++) % MAX_IN_FLIGHT] =
                (in_flight){current_operation, request, deadline};
            continue;
        }
        if (kind == REDLOCK_OUTPUT_WAIT) {
            check(redlock_operation_wait_until(op, &wake_at), "wait_until");
            continue;
        }
        if (kind == REDLOCK_OUTPUT_OUTCOME) {
            redlock_outcome *outcome = NULL;
            check(redlock_operation_take_outcome(op, &outcome), "take_outcome");
            return outcome;
        }
        /* REDLOCK_OUTPUT_NONE: wait for a reply or the instant the core asked for. */
        struct pollfd fds[MAX_NODES];
        size_t which[MAX_NODES], watched = 0;
        for (size_t i = 0; i < MAX_NODES; i++) {
            if (nodes[i].fd >= 0 && nodes[i].count > 0) {
                fds[watched].fd = nodes[i].fd;
                fds[watched].events = POLLIN;
                which[watched++] = i;
            }
        }
        uint64_t now = now_us();
        int timeout_ms = wake_at > now ? (int)((wake_at - now + 999) / 1000) : 0;
        int ready = poll(fds, watched, timeout_ms);
        if (ready < 0 && errno != EINTR) {
            perror("poll");
            exit(1);
        }
        for (size_t f = 0; ready > 0 && f < watched; f++) {
            if (fds[f].revents & (POLLIN | POLLHUP | POLLERR)) read_replies(op, &nodes[which[f]]);
        }
        if (now_us() >= wake_at) check(redlock_operation_handle_timeout(op, now_us()), "timeout");
    }
}

/* After an outcome the slower nodes' commands are still out: the core decides at a
 * quorum. Lets them finish, up to their deadlines, handing the late replies to the
 * operation so its live view of the nodes is complete (for a release, these are the
 * commands that clean the remaining nodes). */
static void finish_in_flight(redlock_operation *op, node *nodes) {
    for (;;) {
        struct pollfd fds[MAX_NODES];
        size_t which[MAX_NODES], watched = 0;
        uint64_t last_deadline = 0;
        for (size_t i = 0; i < MAX_NODES; i++) {
            node *nd = &nodes[i];
            bool ours = false;
            for (size_t k = 0; nd->fd >= 0 && k < nd->count; k++) {
                in_flight entry = nd->queue[(nd->head + k) % MAX_IN_FLIGHT];
                if (entry.operation != current_operation) continue;
                ours = true;
                if (entry.deadline > last_deadline) last_deadline = entry.deadline;
            }
            if (ours) {
                fds[watched].fd = nd->fd;
                fds[watched].events = POLLIN;
                which[watched++] = i;
            }
        }
        uint64_t now = now_us();
        if (watched == 0 || now >= last_deadline) return;
        int ready = poll(fds, watched, (int)((last_deadline - now + 999) / 1000));
        if (ready < 0 && errno != EINTR) {
            perror("poll");
            exit(1);
        }
        for (size_t f = 0; ready > 0 && f < watched; f++) {
            if (fds[f].revents & (POLLIN | POLLHUP | POLLERR)) read_replies(op, &nodes[which[f]]);
        }
    }
}

static void print_token(const char *label, const redlock_outcome *outcome) {
    const uint8_t *token;
    size_t len;
    if (redlock_outcome_token(outcome, &token, &len) == REDLOCK_OK)
        printf("%s token %.*s\n", label, (int)len, (const char *)token);
}

int main(int argc, char **argv) {
    size_t count = (size_t)argc - 1;
    if (argc < 2 || count > MAX_NODES) {
        fprintf(stderr, "usage: %s redis://HOST:PORT ... (1 to %d nodes)\n", argv[0], MAX_NODES);
        return 2;
    }
    node nodes[MAX_NODES];
    memset(nodes, 0, sizeof nodes);
    for (size_t i = 0; i < MAX_NODES; i++) {
        nodes[i].fd = i < count ? connect_url(argv[i + 1]) : -1;
        if (i < count && nodes[i].fd < 0) fprintf(stderr, "node %zu (%s): unreachable\n", i, argv[i + 1]);
        if (i < count) check(redlock_decoder_new(&nodes[i].decoder), "decoder_new");
    }

    redlock_config_builder *builder;
    redlock_config *config;
    redlock_client *client;
    check(redlock_config_builder_new(count, 10000, &builder), "config_builder_new");
    check(redlock_config_builder_set_attempts(builder, 1), "set_attempts");
    check(redlock_config_builder_build(builder, &config), "config_builder_build");
    redlock_config_builder_free(builder);
    check(redlock_client_new(config, &client), "client_new");
    printf("redlock %s, %zu nodes, quorum %zu\n", redlock_version(), count,
           redlock_config_quorum(config));

    char resource[64];
    int resource_len = snprintf(resource, sizeof resource, "redlock-example:%ld", (long)getpid());
    const uint8_t *resources[] = {(const uint8_t *)resource};
    const size_t resource_lens[] = {(size_t)resource_len};

    /* Acquire. */
    redlock_operation *op;
    check(redlock_client_acquire(client, resources, resource_lens, 1, now_us(), &op), "acquire");
    redlock_outcome *acquired = drive(op, nodes);
    redlock_operation_free(op);
    if (redlock_outcome_kind(acquired) != REDLOCK_OUTCOME_ACQUIRED) {
        fprintf(stderr, "not acquired\n");
        return 1;
    }
    uint64_t validity;
    check(redlock_outcome_validity(acquired, &validity), "validity");
    print_token("acquired", acquired);
    printf("acquired %s, valid for %llu us\n", resource, (unsigned long long)validity);

    /* A second client is refused while the lock is held (and cleans up after itself). */
    redlock_client *rival;
    check(redlock_client_new(config, &rival), "client_new");
    check(redlock_client_acquire(rival, resources, resource_lens, 1, now_us(), &op), "acquire");
    redlock_outcome *refused = drive(op, nodes);
    redlock_operation_free(op);
    static const char *reasons[] = {"?", "conflict", "nodes failed", "conflicts and failures",
                                    "validity too short"};
    uint32_t reason = 0;
    bool refused_ok = redlock_outcome_kind(refused) == REDLOCK_OUTCOME_NOT_ACQUIRED &&
                      redlock_outcome_reason(refused, &reason) == REDLOCK_OK;
    printf("second client: %s (%s)\n", refused_ok ? "refused" : "NOT refused",
           reasons[reason <= REDLOCK_REASON_VALIDITY_TOO_SHORT ? reason : 0]);
    redlock_outcome_free(refused);
    redlock_client_free(rival);

    /* Release on every node. */
    redlock_lease *lease;
    check(redlock_outcome_lease(acquired, &lease), "lease");
    check(redlock_client_release(client, lease, now_us(), &op), "release");
    redlock_outcome *released = drive(op, nodes);
    size_t at_decision = 0;
    check(redlock_outcome_released(released, &at_decision), "released");
    /* The release decided once a quorum confirmed; let the other nodes' commands finish
     * before exiting, then count every node that deleted the key. */
    finish_in_flight(op, nodes);
    size_t released_nodes = 0;
    for (size_t i = 0; i < count; i++) {
        uint32_t node_kind;
        const uint8_t *error;
        size_t error_len;
        check(redlock_operation_node(op, i, &node_kind, &error, &error_len), "node");
        if (node_kind == REDLOCK_NODE_SUCCESS) released_nodes++;
    }
    redlock_operation_free(op);
    printf("released on %zu of %zu nodes (%zu when the release decided)\n", released_nodes, count,
           at_decision);

    redlock_outcome_free(released);
    redlock_lease_free(lease);
    redlock_outcome_free(acquired);
    redlock_client_free(client);
    redlock_config_free(config);
    for (size_t i = 0; i < count; i++) {
        if (nodes[i].fd >= 0) close(nodes[i].fd);
        redlock_decoder_free(nodes[i].decoder);
    }
    return refused_ok ? 0 : 1;
}
