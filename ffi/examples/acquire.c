/* The C reference driver: acquires a lock on real Redis nodes through the C ABI with
 * plain non-blocking sockets. One redlock_link per node decides what happens to that
 * node's commands (order, bound in flight, scripts first on every connection, what a
 * stalled node still gets, what is written again after a reconnection); this program
 * only does what the links say (connect, write, close, deliver) and what the operation
 * says (send, wait, outcome). Then shows that a second client is refused while the
 * lock is held, and releases it on every node.
 *
 *   acquire redis://127.0.0.1:7400 redis://127.0.0.1:7401 ...
 *
 * Exits 0 when the lock was acquired, refused to the second client, and released (it
 * prints on how many nodes: each unreachable one is left to the key's TTL).
 *
 * With REDLOCK_EXAMPLE_FENCED_WRITE=redis://HOST:PORT (a Redis server holding the
 * protected item), it is a fenced writer instead: it takes the lock with fencing on
 * REDLOCK_EXAMPLE_RESOURCE (TTL REDLOCK_EXAMPLE_TTL_MS), prints its fencing token, waits
 * REDLOCK_EXAMPLE_HOLD_MS, writes the item through the core's fenced write (EVALSHA,
 * then EVAL if the server asks), prints whether the write was accepted or stale, and
 * releases. Exits 0 when it could write (accepted), 3 when refused as stale. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "redlock.h"

#define MAX_NODES 16
/* How long a connection attempt may take before it counts as timed out. */
#define CONNECT_TIMEOUT_US 1000000u

/* One node: its link, its socket, and the write ids awaiting replies in write order (a
 * Redis connection answers in order). */
typedef struct {
    const char *url;
    struct sockaddr_storage address; /* resolved once, up front */
    socklen_t address_len;
    int family;
    redlock_link *link;
    int fd; /* -1 when there is no connection */
    bool connecting;
    uint64_t connect_deadline;
    redlock_decoder *decoder;
    uint64_t written[REDLOCK_LINK_MAX_IN_FLIGHT];
    size_t head, count;
    uint8_t *out; /* bytes not yet accepted by the socket */
    size_t out_len, out_cap;
} node;

/* The operation being driven and its tag; deliveries for other tags (an operation
 * already finished and freed) are dropped. */
static redlock_operation *current_op;
static uint64_t current_tag;
/* Set when a delivery was handed to the operation: poll it again. */
static bool op_changed;

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

/* Forgets the connection: the link already counts it closed, or is told next. */
static void drop_socket(node *nd) {
    if (nd->fd >= 0) close(nd->fd);
    nd->fd = -1;
    nd->connecting = false;
    nd->head = nd->count = 0;
    nd->out_len = 0;
    redlock_decoder_free(nd->decoder);
    nd->decoder = NULL;
    check(redlock_decoder_new(&nd->decoder), "decoder_new");
}

/* The connection failed or closed: tell the link why. */
static void closed(node *nd, uint32_t cause, const char *why) {
    drop_socket(nd);
    check(redlock_link_handle_closed(nd->link, cause, (const uint8_t *)why, strlen(why), now_us()),
          "link_handle_closed");
}

static uint32_t cause_of(int error) {
    switch (error) {
    case ECONNREFUSED: return REDLOCK_LINK_CAUSE_REFUSED;
    case ETIMEDOUT: return REDLOCK_LINK_CAUSE_TIMEOUT;
    default: return REDLOCK_LINK_CAUSE_CLOSED;
    }
}

/* Resolves redis://host:port (or host:port) once; false if it cannot be. */
static bool resolve(node *nd) {
    char host[256], port[16];
    const char *rest = strncmp(nd->url, "redis://", 8) == 0 ? nd->url + 8 : nd->url;
    const char *colon = strrchr(rest, ':');
    struct addrinfo hints = {0}, *address = NULL;
    hints.ai_socktype = SOCK_STREAM;
    if (!colon || (size_t)(colon - rest) >= sizeof host) return false;
    snprintf(host, sizeof host, "%.*s", (int)(colon - rest), rest);
    snprintf(port, sizeof port, "%s", colon + 1);
    port[strcspn(port, "/")] = '\0';
    if (getaddrinfo(host, port, &hints, &address) != 0) return false;
    memcpy(&nd->address, address->ai_addr, address->ai_addrlen);
    nd->address_len = address->ai_addrlen;
    nd->family = address->ai_family;
    freeaddrinfo(address);
    return true;
}

/* Starts a non-blocking connection to the node. */
static void start_connect(node *nd) {
    int fd = socket(nd->family, SOCK_STREAM, 0);
    if (fd < 0 || fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) != 0) {
        int error = errno;
        if (fd >= 0) close(fd);
        closed(nd, REDLOCK_LINK_CAUSE_CLOSED, strerror(error));
        return;
    }
    int rc = connect(fd, (const struct sockaddr *)&nd->address, nd->address_len);
    int error = errno;
    nd->fd = fd;
    if (rc == 0) {
        check(redlock_link_handle_connected(nd->link, now_us()), "link_handle_connected");
    } else if (error == EINPROGRESS) {
        nd->connecting = true;
        nd->connect_deadline = now_us() + CONNECT_TIMEOUT_US;
    } else {
        closed(nd, cause_of(error), strerror(error));
    }
}

/* Writes what the socket accepts now; the rest waits for POLLOUT. */
static void flush(node *nd) {
    size_t done = 0;
    while (done < nd->out_len) {
        ssize_t n = write(nd->fd, nd->out + done, nd->out_len - done);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
        if (n <= 0) {
            closed(nd, REDLOCK_LINK_CAUSE_CLOSED, "write failed");
            return;
        }
        done += (size_t)n;
    }
    memmove(nd->out, nd->out + done, nd->out_len - done);
    nd->out_len -= done;
}

/* Does what the link outputs until it has nothing more. */
static void pump(node *nd) {
    for (;;) {
        uint32_t kind;
        check(redlock_link_poll_output(nd->link, &kind), "link_poll_output");
        if (kind == REDLOCK_LINK_OUTPUT_NONE) return;
        if (kind == REDLOCK_LINK_OUTPUT_CONNECT) {
            start_connect(nd);
        } else if (kind == REDLOCK_LINK_OUTPUT_WRITE) {
            uint64_t id;
            size_t argc;
            const uint8_t *resp;
            size_t resp_len;
            check(redlock_link_write(nd->link, &id, &argc), "link_write");
            check(redlock_link_write_resp(nd->link, &resp, &resp_len), "link_write_resp");
            if (nd->out_len + resp_len > nd->out_cap) {
                nd->out_cap = (nd->out_len + resp_len) * 2;
                nd->out = realloc(nd->out, nd->out_cap);
                if (!nd->out) exit(1);
            }
            memcpy(nd->out + nd->out_len, resp, resp_len);
            nd->out_len += resp_len;
            /* The link never has more than REDLOCK_LINK_MAX_IN_FLIGHT writes out. */
            nd->written[(nd->head + nd->count++) % REDLOCK_LINK_MAX_IN_FLIGHT] = id;
            if (!nd->connecting) flush(nd);
        } else if (kind == REDLOCK_LINK_OUTPUT_CLOSE) {
            drop_socket(nd);
        } else if (kind == REDLOCK_LINK_OUTPUT_DELIVER) {
            uint64_t tag, request;
            uint32_t reply_kind;
            int64_t integer;
            const uint8_t *text;
            size_t text_len;
            check(redlock_link_delivery(nd->link, &tag, &request, &reply_kind, &integer, &text,
                                        &text_len),
                  "link_delivery");
            if (tag == current_tag && current_op) {
                check(redlock_operation_handle_delivery(current_op, nd->link, now_us()),
                      "handle_delivery");
                op_changed = true;
            }
        }
    }
}

/* Reads what the node sent and hands each reply to its link. */
static void read_replies(node *nd) {
    uint8_t buf[4096];
    ssize_t n = read(nd->fd, buf, sizeof buf);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
    if (n <= 0) {
        closed(nd, REDLOCK_LINK_CAUSE_CLOSED, n == 0 ? "closed by the node" : strerror(errno));
        return;
    }
    check(redlock_decoder_feed(nd->decoder, buf, (size_t)n), "decoder_feed");
    for (;;) {
        redlock_reply *reply = NULL;
        if (redlock_decoder_next_reply(nd->decoder, &reply) != REDLOCK_OK || (reply && nd->count == 0)) {
            /* Not RESP, or a reply nobody asked for: the connection is out of step. */
            redlock_reply_free(reply);
            closed(nd, REDLOCK_LINK_CAUSE_CLOSED, "protocol error");
            return;
        }
        if (!reply) return;
        uint64_t id = nd->written[nd->head];
        nd->head = (nd->head + 1) % REDLOCK_LINK_MAX_IN_FLIGHT;
        nd->count--;
        check(redlock_link_handle_reply_value(nd->link, id, reply, now_us()), "link_handle_reply");
        redlock_reply_free(reply);
    }
}

/* Waits for socket events until `wake_at` or the first link timeout, and handles them. */
static void wait_and_handle(node *nodes, size_t count, uint64_t wake_at) {
    struct pollfd fds[MAX_NODES];
    size_t which[MAX_NODES], watched = 0;
    for (size_t i = 0; i < count; i++) {
        node *nd = &nodes[i];
        bool due;
        uint64_t at;
        check(redlock_link_poll_timeout(nd->link, &due, &at), "link_poll_timeout");
        if (due && at < wake_at) wake_at = at;
        if (nd->connecting && nd->connect_deadline < wake_at) wake_at = nd->connect_deadline;
        if (nd->fd < 0) continue;
        fds[watched].fd = nd->fd;
        fds[watched].events = (short)(POLLIN | (nd->connecting || nd->out_len ? POLLOUT : 0));
        which[watched++] = i;
    }
    uint64_t now = now_us();
    int timeout_ms = wake_at > now ? (int)((wake_at - now + 999) / 1000) : 0;
    int ready = poll(fds, watched, timeout_ms);
    if (ready < 0 && errno != EINTR) {
        perror("poll");
        exit(1);
    }
    for (size_t f = 0; ready > 0 && f < watched; f++) {
        node *nd = &nodes[which[f]];
        if (nd->fd != fds[f].fd || !fds[f].revents) continue;
        if (nd->connecting) {
            int error = 0;
            socklen_t len = sizeof error;
            getsockopt(nd->fd, SOL_SOCKET, SO_ERROR, &error, &len);
            if (error) {
                closed(nd, cause_of(error), strerror(error));
                continue;
            }
            nd->connecting = false;
            check(redlock_link_handle_connected(nd->link, now_us()), "link_handle_connected");
            pump(nd);
            if (nd->fd >= 0) flush(nd);
            continue;
        }
        if (fds[f].revents & (POLLIN | POLLHUP | POLLERR)) read_replies(nd);
        if (nd->fd >= 0 && (fds[f].revents & POLLOUT)) flush(nd);
    }
    now = now_us();
    for (size_t i = 0; i < count; i++) {
        node *nd = &nodes[i];
        if (nd->connecting && now >= nd->connect_deadline)
            closed(nd, REDLOCK_LINK_CAUSE_TIMEOUT, "no connection in time");
        bool due;
        uint64_t at;
        check(redlock_link_poll_timeout(nd->link, &due, &at), "link_poll_timeout");
        if (due && now >= at) check(redlock_link_handle_timeout(nd->link, now), "link_timeout");
        pump(nd);
    }
}

/* Drives `op` to its outcome over the nodes' links: the driver loop of the C ABI.
 * `*last_deadline` is the latest deadline of its commands. */
static redlock_outcome *drive(redlock_operation *op, node *nodes, size_t count,
                              uint64_t *last_deadline) {
    uint64_t wake_at = UINT64_MAX;
    current_op = op;
    current_tag++;
    for (;;) {
        op_changed = false;
        uint32_t kind;
        check(redlock_operation_poll_output(op, &kind), "poll_output");
        if (kind == REDLOCK_OUTPUT_SEND) {
            size_t index, argc;
            uint64_t request, deadline;
            check(redlock_operation_command(op, &index, &request, &deadline, &argc), "command");
            if (deadline > *last_deadline) *last_deadline = deadline;
            check(redlock_link_submit_current(nodes[index].link, current_tag, op, now_us()),
                  "link_submit");
            pump(&nodes[index]);
            continue;
        }
        if (kind == REDLOCK_OUTPUT_OUTCOME) {
            redlock_outcome *outcome = NULL;
            check(redlock_operation_take_outcome(op, &outcome), "take_outcome");
            return outcome;
        }
        if (kind == REDLOCK_OUTPUT_WAIT) {
            /* The operation's only wake-up; more outputs may follow a delivery made
             * while its commands were submitted. */
            check(redlock_operation_wait_until(op, &wake_at), "wait_until");
            continue;
        }
        /* REDLOCK_OUTPUT_NONE: nothing until a socket event, a link's timeout, or the
         * operation's wake-up. A delivery is an input to the operation: poll again. */
        wait_and_handle(nodes, count, wake_at);
        if (!op_changed && now_us() >= wake_at) {
            check(redlock_operation_handle_timeout(op, now_us()), "timeout");
            wake_at = UINT64_MAX;
        }
    }
}

/* After an outcome the slower nodes' commands are still out: the core decides at a
 * quorum. Lets them finish, up to their deadlines, handing the late replies to the
 * operation so its live view of the nodes is complete (for a release, these are the
 * commands that clean the remaining nodes). */
static void finish_in_flight(redlock_operation *op, node *nodes, size_t count,
                             uint64_t last_deadline) {
    current_op = op;
    for (;;) {
        bool idle = true;
        for (size_t i = 0; i < count; i++) idle = idle && redlock_link_is_idle(nodes[i].link);
        if (idle || now_us() >= last_deadline) return;
        wait_and_handle(nodes, count, last_deadline);
        /* Late replies to a finished operation output nothing; polled all the same. */
        uint32_t kind;
        check(redlock_operation_poll_output(op, &kind), "poll_output");
    }
}

static void print_token(const char *label, const redlock_outcome *outcome) {
    const uint8_t *token;
    size_t len;
    if (redlock_outcome_token(outcome, &token, &len) == REDLOCK_OK)
        printf("%s token %.*s\n", label, (int)len, (const char *)token);
}

/* Prints why each failed node failed, as the core classifies it. */
static void print_causes(const redlock_outcome *outcome) {
    for (size_t i = 0; i < redlock_outcome_node_count(outcome); i++) {
        uint32_t cause;
        if (redlock_outcome_node_cause(outcome, i, &cause) == REDLOCK_OK && cause)
            printf("node %zu: %s\n", i, redlock_node_cause_name(cause));
    }
}

/* Writes all of `bytes` to a blocking socket. */
static bool send_all(int fd, const uint8_t *bytes, size_t len) {
    while (len > 0) {
        ssize_t n = write(fd, bytes, len);
        if (n <= 0) return false;
        bytes += n;
        len -= (size_t)n;
    }
    return true;
}

/* One fenced write of `value` to `item` on the server at `url`, under `token`, over a
 * blocking connection of its own: the core builds the command and reads the reply.
 * Returns a REDLOCK_FENCED_* result; `*seen` is the item's token when stale. */
static uint32_t fenced_write(const char *url, const char *item, const char *value, uint64_t token,
                             uint64_t *seen) {
    node server;
    memset(&server, 0, sizeof server);
    server.url = url;
    if (!resolve(&server)) return REDLOCK_FENCED_FAILED;
    int fd = socket(server.family, SOCK_STREAM, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&server.address, server.address_len) != 0) {
        if (fd >= 0) close(fd);
        return REDLOCK_FENCED_FAILED;
    }
    redlock_fenced_set *write_op;
    check(redlock_fenced_set_new((const uint8_t *)item, strlen(item), (const uint8_t *)value,
                                 strlen(value), token, &write_op),
          "fenced_set_new");
    redlock_decoder *decoder;
    check(redlock_decoder_new(&decoder), "decoder_new");
    uint32_t result = REDLOCK_FENCED_FAILED;
    for (bool eval = false;; eval = true) {
        const uint8_t *args[7];
        size_t lens[7], argc, framed = 0;
        check(redlock_fenced_set_args(write_op, eval, args, lens, 7, &argc), "fenced_set_args");
        char header[32];
        bool sent = true;
        int n = snprintf(header, sizeof header, "*%zu\r\n", argc);
        sent = send_all(fd, (const uint8_t *)header, (size_t)n);
        for (size_t i = 0; sent && i < argc; i++) {
            n = snprintf(header, sizeof header, "$%zu\r\n", lens[i]);
            sent = send_all(fd, (const uint8_t *)header, (size_t)n) &&
                   send_all(fd, args[i], lens[i]) && send_all(fd, (const uint8_t *)"\r\n", 2);
            framed++;
        }
        redlock_reply *reply = NULL;
        while (sent && framed == argc && reply == NULL) {
            uint8_t buffer[4096];
            ssize_t got = read(fd, buffer, sizeof buffer);
            if (got <= 0) break;
            check(redlock_decoder_feed(decoder, buffer, (size_t)got), "decoder_feed");
            if (redlock_decoder_next_reply(decoder, &reply) != REDLOCK_OK) break;
        }
        if (reply == NULL) break;
        check(redlock_fenced_set_handle_reply(write_op, reply, &result), "fenced_set_handle_reply");
        redlock_reply_free(reply);
        if (result != REDLOCK_FENCED_RETRY_AS_EVAL || eval) break;
    }
    if (result == REDLOCK_FENCED_STALE) check(redlock_fenced_set_seen(write_op, seen), "seen");
    redlock_fenced_set_free(write_op);
    redlock_decoder_free(decoder);
    close(fd);
    return result;
}

static uint64_t env_u64(const char *name, uint64_t fallback) {
    const char *text = getenv(name);
    return text && *text ? strtoull(text, NULL, 10) : fallback;
}

int main(int argc, char **argv) {
    size_t count = (size_t)argc - 1;
    if (argc < 2 || count > MAX_NODES) {
        fprintf(stderr, "usage: %s redis://HOST:PORT ... (1 to %d nodes)\n", argv[0], MAX_NODES);
        return 2;
    }
    /* The same server twice would count twice towards the quorum. */
    const uint8_t *addresses[MAX_NODES];
    size_t address_lens[MAX_NODES];
    for (size_t i = 0; i < count; i++) {
        addresses[i] = (const uint8_t *)argv[i + 1];
        address_lens[i] = strlen(argv[i + 1]);
    }
    bool duplicate;
    size_t first, second;
    check(redlock_duplicate_node(addresses, address_lens, count, &duplicate, &first, &second),
          "duplicate_node");
    if (duplicate) {
        fprintf(stderr, "nodes %zu and %zu are the same server\n", first, second);
        return 2;
    }
    node nodes[MAX_NODES];
    memset(nodes, 0, sizeof nodes);
    for (size_t i = 0; i < count; i++) {
        nodes[i].url = argv[i + 1];
        nodes[i].fd = -1;
        if (!resolve(&nodes[i])) {
            fprintf(stderr, "node %zu: cannot resolve %s\n", i, nodes[i].url);
            return 2;
        }
        check(redlock_link_new(&nodes[i].link), "link_new");
        check(redlock_decoder_new(&nodes[i].decoder), "decoder_new");
    }

    redlock_config_builder *builder;
    redlock_config *config;
    redlock_client *client;
    const char *fenced_url = getenv("REDLOCK_EXAMPLE_FENCED_WRITE");
    uint64_t ttl_ms = env_u64("REDLOCK_EXAMPLE_TTL_MS", 10000);
    check(redlock_config_builder_new(count, ttl_ms, &builder), "config_builder_new");
    check(redlock_config_builder_set_attempts(builder, 1), "set_attempts");
    /* The first round also opens the connections and loads the scripts, and the tests
     * run this program under valgrind, many times slower: give each node 3 s rather
     * than the default 50 ms (at most a third of the TTL, as the core requires). */
    uint64_t node_timeout_us = ttl_ms * 1000 / 3 < 3000000 ? ttl_ms * 1000 / 3 : 3000000;
    check(redlock_config_builder_set_node_timeout_us(builder, node_timeout_us),
          "set_node_timeout");
    if (fenced_url) check(redlock_config_builder_set_fencing(builder, true), "set_fencing");
    check(redlock_config_builder_build(builder, &config), "config_builder_build");
    redlock_config_builder_free(builder);
    check(redlock_client_new(config, &client), "client_new");
    printf("redlock %s, %zu nodes, quorum %zu\n", redlock_version(), count,
           redlock_config_quorum(config));

    char resource[64];
    const char *named = getenv("REDLOCK_EXAMPLE_RESOURCE");
    int resource_len = named && *named
                           ? snprintf(resource, sizeof resource, "%s", named)
                           : snprintf(resource, sizeof resource, "redlock-example:%ld", (long)getpid());
    const uint8_t *resources[] = {(const uint8_t *)resource};
    const size_t resource_lens[] = {(size_t)resource_len};
    uint64_t last_deadline = 0;

    /* Acquire. */
    redlock_operation *op;
    check(redlock_client_acquire(client, resources, resource_lens, 1, now_us(), &op), "acquire");
    redlock_outcome *acquired = drive(op, nodes, count, &last_deadline);
    redlock_operation_free(op);
    current_op = NULL;
    print_causes(acquired);
    bool held = redlock_outcome_kind(acquired) == REDLOCK_OUTCOME_ACQUIRED;
    bool refused_ok = false;
    if (!held) {
        fprintf(stderr, "not acquired: %s\n",
                redlock_error_class_name(redlock_outcome_error_class(acquired)));
        goto done;
    }
    uint64_t validity;
    check(redlock_outcome_validity(acquired, &validity), "validity");
    print_token("acquired", acquired);
    printf("acquired %s, valid for %llu us\n", resource, (unsigned long long)validity);

    int fenced_status = 0;
    if (fenced_url) {
        /* The fenced writer: hold, then write the item under the lock's token. */
        uint64_t token = 0, seen = 0;
        check(redlock_outcome_fencing_token(acquired, &token), "fencing_token");
        printf("fencing token %" PRIu64 "\n", token);
        fflush(stdout);
        uint64_t hold_us = env_u64("REDLOCK_EXAMPLE_HOLD_MS", 0) * 1000;
        struct timespec pause = {(time_t)(hold_us / 1000000), (long)(hold_us % 1000000) * 1000};
        while (nanosleep(&pause, &pause) != 0) {
        }
        char value[64];
        snprintf(value, sizeof value, "written under token %" PRIu64, token);
        uint32_t result = fenced_write(fenced_url, resource, value, token, &seen);
        if (result == REDLOCK_FENCED_ACCEPTED) {
            printf("fenced write: accepted\n");
        } else if (result == REDLOCK_FENCED_STALE) {
            printf("fenced write: stale (the item has seen %" PRIu64 ")\n", seen);
            fenced_status = 3;
        } else {
            printf("fenced write: failed\n");
            fenced_status = 1;
        }
        fflush(stdout);
        refused_ok = true;
        goto release;
    }

    /* A second client is refused while the lock is held (and cleans up after itself). */
    redlock_client *rival;
    check(redlock_client_new(config, &rival), "client_new");
    check(redlock_client_acquire(rival, resources, resource_lens, 1, now_us(), &op), "acquire");
    redlock_outcome *refused = drive(op, nodes, count, &last_deadline);
    redlock_operation_free(op);
    current_op = NULL;
    static const char *reasons[] = {"?", "conflict", "nodes failed", "conflicts and failures",
                                    "validity too short"};
    uint32_t reason = 0;
    /* Refused: held elsewhere when every node answered, nodes failing when an unreachable
     * node leaves it open whether the lock is held. */
    refused_ok = redlock_outcome_kind(refused) == REDLOCK_OUTCOME_NOT_ACQUIRED &&
                      redlock_outcome_reason(refused, &reason) == REDLOCK_OK;
    printf("second client: %s (%s)\n", refused_ok ? "refused" : "NOT refused",
           reasons[reason <= REDLOCK_REASON_VALIDITY_TOO_SHORT ? reason : 0]);
    printf("second client error class: %s\n",
           redlock_error_class_name(redlock_outcome_error_class(refused)));
    redlock_outcome_free(refused);
    redlock_client_free(rival);

release:;
    /* Release on every node. */
    redlock_lease *lease;
    check(redlock_outcome_lease(acquired, &lease), "lease");
    check(redlock_client_release(client, lease, now_us(), &op), "release");
    last_deadline = 0;
    redlock_outcome *released = drive(op, nodes, count, &last_deadline);
    size_t at_decision = 0;
    check(redlock_outcome_released(released, &at_decision), "released");
    /* The release decided once a quorum confirmed; let the other nodes' commands finish
     * before exiting, then count every node that deleted the key. */
    finish_in_flight(op, nodes, count, last_deadline);
    size_t released_nodes = 0;
    for (size_t i = 0; i < count; i++) {
        uint32_t node_kind;
        const uint8_t *error;
        size_t error_len;
        check(redlock_operation_node(op, i, &node_kind, &error, &error_len), "node");
        if (node_kind == REDLOCK_NODE_SUCCESS) released_nodes++;
    }
    redlock_operation_free(op);
    current_op = NULL;
    printf("released on %zu of %zu nodes (%zu when the release decided)\n", released_nodes, count,
           at_decision);

    redlock_outcome_free(released);
    redlock_lease_free(lease);
done:
    redlock_outcome_free(acquired);
    redlock_client_free(client);
    redlock_config_free(config);
    for (size_t i = 0; i < count; i++) {
        drop_socket(&nodes[i]);
        redlock_decoder_free(nodes[i].decoder);
        redlock_link_free(nodes[i].link);
        free(nodes[i].out);
    }
    if (fenced_status != 0) return fenced_status;
    return held && refused_ok ? 0 : 1;
}
