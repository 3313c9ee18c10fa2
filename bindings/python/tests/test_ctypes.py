"""The ctypes layer: every function of the header declared, and every error path a
caller can reach raising a clear Python exception (never crashing the interpreter)."""

from __future__ import annotations

import ctypes
import os
import re
import subprocess
import sys
import threading
from datetime import timedelta

import pytest

import redlock_core
from redlock_core import (
    ConfigError,
    CoreError,
    InvalidArgumentError,
    ProtocolError,
    UsageError,
    UsedAfterCloseError,
    core,
)
from redlock_core import _ffi as ffi

from .conftest import REPO

HEADER = REPO / "ffi" / "include" / "redlock.h"

C_TYPES = {
    "redlock_result": ctypes.c_uint32,
    "uint32_t": ctypes.c_uint32,
    "uint64_t": ctypes.c_uint64,
    "int64_t": ctypes.c_int64,
    "size_t": ctypes.c_size_t,
    "bool": ctypes.c_bool,
    "double": ctypes.c_double,
}


def header_functions() -> dict[str, tuple[str, list[str]]]:
    text = re.sub(r"/\*.*?\*/", "", HEADER.read_text(), flags=re.S)
    functions = {}
    for match in re.finditer(r"\n([a-z0-9_ ]+?[ *]+)(redlock_\w+)\(([^;]*?)\);", text):
        params = " ".join(match.group(3).split())
        args = [] if params == "void" else [p.strip() for p in params.split(",")]
        functions[match.group(2)] = (" ".join(match.group(1).split()), args)
    return functions


BYTE_POINTERS = {
    "const uint8_t *const *": ffi.BYTES_ARRAY,  # an array of byte strings, in
    "const uint8_t **": ffi.OUT_PTR,  # borrowed bytes, out
    "const uint8_t *": ffi.BYTES,  # bytes, in
    "uint8_t *": ffi.BUFFER,  # a buffer the library writes
    "const char *": ctypes.c_char_p,  # a static text
}


def expected_ctype(declaration: str) -> object:
    """The ctypes type a C parameter or return type maps to in _ffi."""

    def compact(text: str) -> str:
        return re.sub(r"\s*\*\s*", "*", " ".join(text.split()))

    for c_type, ctype in BYTE_POINTERS.items():
        if compact(declaration) == compact(c_type):
            return ctype
    stars = declaration.count("*")
    base = declaration.replace("const ", "").replace("*", " ").split()[0]
    if stars == 0:
        return None if base == "void" else C_TYPES[base]
    if base.startswith("redlock_") and base != "redlock_result":
        return ffi.HANDLE if stars == 1 else ffi.OUT_HANDLE
    assert stars == 1, declaration
    return ctypes.POINTER(C_TYPES[base])


def test_every_header_function_is_declared_with_its_types() -> None:
    functions = header_functions()
    assert len(functions) >= 100
    assert set(functions) == set(ffi.SIGNATURES), "the declarations and the header differ"
    for name, (ret, params) in functions.items():
        restype, argtypes = ffi.SIGNATURES[name]
        function = getattr(ffi.lib, name)
        assert function.restype is restype and function.argtypes == argtypes, name
        assert restype is expected_ctype(ret), f"{name}: return type {ret}"
        assert len(argtypes) == len(params), f"{name}: {len(params)} parameters"
        for declared, param in zip(argtypes, params):
            c_type = re.sub(r"\w+$", "", param)  # drop the parameter's name
            assert declared is expected_ctype(c_type), f"{name}: {param}"


def test_the_notice_subscription_constants_come_from_the_core() -> None:
    from redlock_core._handle import (
        connect_timeout_default_ms,
        notice_channel_linger_ms,
        subscriber_reopen_ms,
    )

    # The linger and the subscriber's pauses before it is opened again: the core's
    # Subscriptions apply them (tests/test_subscriptions.py), the drivers keep no copy.
    assert notice_channel_linger_ms() == 500
    assert subscriber_reopen_ms() == (100, 5000)
    # The bound on opening a connection the client leaves unbounded, and on a
    # subscription's confirmation.
    assert connect_timeout_default_ms() == 2000


def test_the_sentinel_bounds_come_from_the_core() -> None:
    from redlock_core._handle import (
        sentinel_connect_timeout_ms,
        sentinel_query_timeout_default_ms,
    )

    # How long one Sentinel may take when the user sets no bound, and the connect
    # timeout of a node behind N of them: N * query + connect, saturating.
    assert sentinel_query_timeout_default_ms() == 500
    assert sentinel_connect_timeout_ms(2, 500, 2000) == 3000
    assert sentinel_connect_timeout_ms(1, 250, 750) == 1000
    assert sentinel_connect_timeout_ms(0, 500, 2000) == 2000
    assert sentinel_connect_timeout_ms(3, 2**64 - 1, 5) == 2**64 - 1
    with pytest.raises(ValueError, match="query_ms"):
        sentinel_connect_timeout_ms(1, -1, 0)


def test_result_names_and_messages_come_from_the_core() -> None:
    assert ffi.result_name(ffi.OK) == "ok"
    assert ffi.result_name(9202) == "ttl_zero"
    assert ffi.result_name(12345) == "unknown_result"
    assert "TTL" in ffi.result_message(9202) or "ttl" in ffi.result_message(9202)
    error = ffi.error(9100, "handle_reply")
    assert isinstance(error, UsageError)
    assert error.code == "unknown_request" and error.result == 9100
    assert str(error).startswith("handle_reply: ") and "(unknown_request)" in str(error)
    assert isinstance(ffi.error(9300), ProtocolError)
    assert isinstance(ffi.error(9205), ConfigError)
    assert isinstance(ffi.error(ffi.NULL_PARAMETER), InvalidArgumentError)
    assert type(ffi.error(ffi.PANIC)) is CoreError


def test_null_pointers_are_refused_by_the_library_not_a_crash() -> None:
    out = ctypes.c_void_p()
    rc = ffi.lib.redlock_client_new(None, ctypes.byref(out))
    assert ffi.result_name(rc) == "null_parameter"
    with pytest.raises(InvalidArgumentError, match="null_parameter"):
        ffi.check(rc, "client_new")
    assert ffi.lib.redlock_operation_poll_output(None, None) == ffi.NULL_PARAMETER
    assert ffi.lib.redlock_lease_valid_until(None) == 0
    assert ffi.lib.redlock_outcome_kind(None) == 0
    ffi.lib.redlock_operation_free(None)  # NULL is ignored
    # Bytes with a length but no pointer.
    assert ffi.lib.redlock_decoder_feed(None, None, 3) == ffi.NULL_PARAMETER
    assert (
        ffi.lib.redlock_operation_handle_notice_message(None, 0, None, 3, 0) == ffi.NULL_PARAMETER
    )


def test_configuration_errors_carry_the_core_code() -> None:
    cases = [
        (dict(nodes=0, ttl_ms=1000), "no_nodes"),
        (dict(nodes=256, ttl_ms=1000), "too_many_nodes"),
        (dict(nodes=3, ttl_ms=0), "ttl_zero"),
        (dict(nodes=3, ttl_ms=core.max_ttl_ms() + 1), "ttl_too_large"),
        (dict(nodes=3, ttl_ms=1000, drift_factor=1.5), "drift_factor_invalid"),
        (dict(nodes=3, ttl_ms=1000, drift_factor=float("nan")), "drift_factor_invalid"),
        (dict(nodes=3, ttl_ms=1000, node_timeout_us=0), "node_timeout_zero"),
        (dict(nodes=3, ttl_ms=1000, attempts=0), "attempts_zero"),
        (dict(nodes=3, ttl_ms=1000, retry_delay_us=10, retry_jitter_us=0), "retry_delay_too_short"),
        (dict(nodes=3, ttl_ms=1000, retry_delay_us=5000, retry_jitter_us=6000), "jitter_too_large"),
        (dict(nodes=3, ttl_ms=1000, token_bytes=8), "token_too_short"),
    ]
    for kwargs, code in cases:
        nodes = kwargs.pop("nodes")
        ttl_ms = kwargs.pop("ttl_ms")
        with pytest.raises(ConfigError) as raised:
            core.Config(nodes, ttl_ms, **kwargs)  # type: ignore[arg-type]
        assert raised.value.code == code
        assert raised.value.message  # the core's sentence


def test_python_side_checks_reject_bad_arguments_before_c() -> None:
    with pytest.raises(ValueError, match="nodes"):
        core.Config(-1, 1000)
    with pytest.raises(TypeError, match="ttl_ms"):
        core.Config(3, "1000")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        core.Config(3, True)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        core.Config(3, 2**64)
    with pytest.raises(TypeError, match="key_prefix"):
        core.Config(3, 1000, key_prefix=5)  # type: ignore[arg-type]
    with core.Config(3, 1000) as config:
        with pytest.raises(TypeError, match="config"):
            core.Client("config")  # type: ignore[arg-type]
        with pytest.raises(InvalidArgumentError, match="invalid_input"):
            core.Client(config, seed=b"short")
        client = core.Client(config, seed=bytes(32))
    with pytest.raises(TypeError, match="resource"):
        client.acquire([1, 2], 0)  # type: ignore[list-item]
    with pytest.raises(TypeError, match="resources"):
        client.acquire(42, 0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="now"):
        client.acquire("r", -5)
    with pytest.raises(TypeError, match="lease"):
        client.release("not a lease", 0)  # type: ignore[arg-type]
    client.close()


def test_usage_errors_from_the_core() -> None:
    with core.Config(3, 1000) as config, core.Client(config, seed=bytes(32)) as client:
        for resources, code in [
            ([], "no_resources"),
            ([""], "empty_resource"),
            (["a", "a"], "duplicate_resource"),
            ([f"r{i}" for i in range(65)], "too_many_resources"),
        ]:
            with pytest.raises(UsageError) as raised:
                client.acquire(resources, 0)
            assert raised.value.code == code
        with pytest.raises(UsageError, match="not_enough_random_bytes"):
            client.acquire_with_random("r", b"\x00" * 4, 0)
        with pytest.raises(UsageError, match="invalid_token"):
            client.lease("r", "has space", 0)
        with pytest.raises(ConfigError) as raised:
            client.check_ttl(0)
        assert raised.value.code == "ttl_zero"
        with pytest.raises(UsageError, match="invalid_ttl"):
            client.acquire("r", 0, ttl_ms=0)

        with client.acquire("r", 1000) as op:
            with pytest.raises(CoreError) as raised:
                op.wait_until()  # the current output is none yet
            assert raised.value.code == "no_value"
            assert op.poll() == ffi.OUTPUT_SEND
            command = op.command()
            with pytest.raises(InvalidArgumentError, match="out_of_range"):
                op.command_arg(99)
            with pytest.raises(UsageError, match="unknown_request"):
                op.handle_reply(999, ffi.REPLY_OK, 1100)
            with pytest.raises(InvalidArgumentError, match="invalid_input"):
                op.handle_reply(command.request_id, 77, 1100)  # no such reply kind
            with pytest.raises(InvalidArgumentError, match="invalid_input"):
                op.handle_reply(command.request_id, ffi.REPLY_ARRAY, 1100)
            op.handle_reply(command.request_id, ffi.REPLY_OK, 1100)
            with pytest.raises(UsageError, match="duplicate_reply"):
                op.handle_reply(command.request_id, ffi.REPLY_OK, 1200)
            with pytest.raises(InvalidArgumentError, match="out_of_range"):
                op.node(3)
            assert op.node(0) == ("success", None)
            # A release notice's message goes to the core as given; a bad node or
            # message is refused with a clear error.
            with pytest.raises(UsageError, match="unknown_node"):
                op.handle_notice_message(3, b"a waiter", 1300)
            with pytest.raises(TypeError, match="message"):
                op.handle_notice_message(0, 7, 1300)  # type: ignore[arg-type]
            op.handle_notice_message(0, b"", 1300)
            op.handle_notice_message(1, b"\x00\xff not a token", 1300)


def test_an_outcome_its_caller_never_took_is_given_back_to_the_core() -> None:
    """The engine's cancellation meeting a decided acquisition: the outcome goes back
    through ``decline`` and the core gives the release of its lock to every node."""
    with core.Config(3, 1000) as config, core.Client(config, seed=bytes(32)) as client:
        with client.acquire("r", 1000) as op, client.acquire("s", 1000) as other:
            while (kind := op.poll()) == ffi.OUTPUT_SEND:
                op.handle_reply(op.command().request_id, ffi.REPLY_OK, 1100)
            assert kind == ffi.OUTPUT_OUTCOME
            outcome = op.take_outcome()
            assert outcome.kind == "acquired"
            with pytest.raises(UsageError, match="foreign_outcome"):
                other.decline(outcome, 1200)  # not the one that handed it out
            assert outcome.closed  # consumed whatever the result
            assert op.poll() == ffi.OUTPUT_NONE
            with pytest.raises(UsedAfterCloseError):
                op.decline(outcome, 1200)

        with client.acquire("r", 2000) as op:
            while (kind := op.poll()) == ffi.OUTPUT_SEND:
                op.handle_reply(op.command().request_id, ffi.REPLY_OK, 2100)
            assert kind == ffi.OUTPUT_OUTCOME
            op.decline(op.take_outcome(), 2200)
            releases = []
            while op.poll() == ffi.OUTPUT_SEND:
                releases.append((op.target()[0], op.command_kind()[0]))
            assert sorted(releases) == [(n, ffi.COMMAND_RELEASE) for n in range(3)]
            assert op.poll() == ffi.OUTPUT_NONE


def test_replies_and_decoder_errors() -> None:
    with pytest.raises(InvalidArgumentError, match="invalid_input"):
        core.Reply.new(42)
    with core.Reply.new(ffi.REPLY_INTEGER, integer=5) as number:
        assert number.integer == 5 and number.bytes is None
        with pytest.raises(InvalidArgumentError, match="invalid_input"):
            number.push(number)  # not an array
        with pytest.raises(ValueError):
            core.Reply.new(ffi.REPLY_INTEGER, integer=2**63)
    with core.Decoder() as decoder:
        decoder.feed(b"?oops\r\n")
        with pytest.raises(ProtocolError) as raised:
            decoder.next_reply()
        assert raised.value.code == "unknown_type"
        with pytest.raises(ProtocolError):  # and keeps saying so
            decoder.next_reply()
    with core.Decoder(max_bulk=4) as decoder:
        decoder.feed(b"$10\r\n")
        with pytest.raises(ProtocolError, match="too_large"):
            decoder.next_reply()
    with pytest.raises(ValueError, match="script"):
        core.script_text(9)
    with pytest.raises(InvalidArgumentError):
        core.token_from_random_bytes(b"short")
    assert core.token_from_random_bytes(bytes(range(16))) == bytes(range(16)).hex()


def test_the_core_says_when_an_acquisition_listens_for_notices() -> None:
    """Operation.listens: with a wait limit from the first refusal by a held key (from
    the start when the client waited for the resource a moment ago); otherwise once an
    attempt failed and another may follow; never after the outcome or for other
    operations."""
    with core.Config(3, 1000, attempts=2) as config, core.Client(config, seed=bytes(32)) as client:
        with client.acquire("r", 0, wait_us=2_000_000) as op:
            assert not op.listens, "nothing refused it yet"
            sends = []
            while op.poll() == ffi.OUTPUT_SEND:
                sends.append(op.command().request_id)
            op.handle_reply(sends[0], ffi.REPLY_INTEGER, 100, integer=0)  # refused: held there
            assert op.listens, "from its first conflict"
        with client.acquire("r", 200, wait_us=2_000_000) as op:
            assert op.listens, "from its start: a wait for r a moment ago"
        with client.acquire("r", 0) as op:
            assert not op.listens
            sends = []
            while op.poll() == ffi.OUTPUT_SEND:
                sends.append(op.command().request_id)
            assert not op.listens, "a first attempt may win"
            for request in sends[:2]:  # refused twice of three: the attempt failed
                op.handle_reply(request, ffi.REPLY_NIL, 100)
            assert op.listens, "its cleanup goes out, and another attempt may follow"
    with core.Config(3, 1000, attempts=1) as config, core.Client(config, seed=bytes(32)) as client:
        with client.acquire("r", 0) as op:
            sends = []
            while op.poll() == ffi.OUTPUT_SEND:
                sends.append(op.command().request_id)
            for request in sends[:2]:
                op.handle_reply(request, ffi.REPLY_NIL, 100)
            assert not op.listens, "no attempt can follow"


def test_a_links_connect_timeout_is_set_read_back_and_gives_an_attempt_up() -> None:
    """Link.set_connect_timeout / connect_timeout_ms: the core's default on a new link,
    the value set (0 taken as 1 ms), clear errors for bad arguments and a closed link;
    an attempt not reported open within it is given up by the core (CLOSE, then the
    queued command fails with cause timeout)."""
    from redlock_core._handle import connect_timeout_default_ms

    with core.Link() as link:
        assert link.connect_timeout_ms == connect_timeout_default_ms() == 2000
        link.set_connect_timeout(250)
        assert link.connect_timeout_ms == 250
        link.set_connect_timeout(0)
        assert link.connect_timeout_ms == 1
        with pytest.raises(TypeError, match="timeout_ms"):
            link.set_connect_timeout("250")  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="timeout_ms"):
            link.set_connect_timeout(True)
        with pytest.raises(TypeError, match="timeout_ms"):
            link.set_connect_timeout(0.25)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="timeout_ms"):
            link.set_connect_timeout(-1)
        with pytest.raises(ValueError, match="timeout_ms"):
            link.set_connect_timeout(2**64)
        assert link.connect_timeout_ms == 1  # unchanged by the refused calls
    with pytest.raises(ValueError, match="Link is closed"):
        link.set_connect_timeout(250)
    with pytest.raises(ValueError, match="Link is closed"):
        _ = link.connect_timeout_ms
    with pytest.raises(ValueError, match="timeout_ms"):
        core.Link(connect_timeout_ms=-5)
    # The C functions themselves refuse NULL.
    assert ffi.lib.redlock_link_set_connect_timeout(None, 250) == ffi.NULL_PARAMETER
    assert ffi.lib.redlock_link_connect_timeout_ms(None) == 0

    # The command may wait a second for its node: the connect timeout comes first.
    config = core.Config(1, 10_000, node_timeout_us=1_000_000)
    with config, core.Client(config, seed=bytes(32)) as client:
        with core.Link(connect_timeout_ms=500) as link, client.acquire("r", 1000) as op:
            assert link.connect_timeout_ms == 500
            assert op.poll() == ffi.OUTPUT_SEND
            link.submit(7, op, 1000)
            assert link.poll() == ffi.LINK_OUTPUT_CONNECT
            assert link.poll() == ffi.LINK_OUTPUT_NONE
            assert link.poll_timeout() == 1000 + 500_000  # the attempt's deadline
            link.handle_timeout(1000 + 499_999)
            assert link.poll() == ffi.LINK_OUTPUT_NONE  # not yet
            link.handle_timeout(1000 + 500_000)
            assert link.poll() == ffi.LINK_OUTPUT_CLOSE
            assert not link.is_open
            assert link.poll() == ffi.LINK_OUTPUT_DELIVER
            delivery = link.delivery()
            assert delivery.tag == 7 and delivery.kind == ffi.REPLY_CONNECTION_FAILED
            assert delivery.text.startswith(b"timeout: no connection within 500 ms"), delivery
            # What the driver reports for the attempt given up changes nothing.
            link.handle_closed(ffi.LINK_CAUSE_CLOSED, "late", 1000 + 600_000)
            assert link.poll() == ffi.LINK_OUTPUT_NONE


def test_closed_handles_raise_instead_of_touching_freed_memory() -> None:
    config = core.Config(3, 1000)
    client = core.Client(config)
    config.close()
    config.close()  # idempotent
    with pytest.raises(ValueError, match="Config is closed"):
        _ = config.quorum
    op = client.acquire("r", 0)  # the client copied the configuration
    op.close()
    with pytest.raises(ValueError, match="Operation is closed"):
        op.poll()
    client.close()
    with pytest.raises(ValueError, match="Client is closed"):
        client.acquire("r", 0)


def test_durations_are_checked() -> None:
    assert core.micros(0.25, "x") == 250_000
    assert core.micros(timedelta(milliseconds=3), "x") == 3000
    assert core.millis(0.1, "ttl") == 100
    with pytest.raises(ValueError, match="whole number of milliseconds"):
        core.millis(0.0005, "ttl")
    with pytest.raises(ValueError, match="negative"):
        core.micros(-1, "x")
    with pytest.raises(ValueError, match="finite"):
        core.micros(float("inf"), "x")
    with pytest.raises(TypeError):
        core.micros("1", "x")
    with pytest.raises(ConfigError, match="ttl_zero"):
        redlock_core.Redlock.from_urls(["redis://127.0.0.1:1"], ttl=0)


def test_many_threads_share_one_client_safely() -> None:
    with core.Config(5, 10_000) as config, core.Client(config) as client:
        errors: list[BaseException] = []

        def cycle() -> None:
            try:
                for _ in range(300):
                    run_cycle(client, now=1_000)
            except BaseException as error:
                errors.append(error)

        threads = [threading.Thread(target=cycle) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert not errors


def run_cycle(client: core.Client, now: int) -> None:
    """One N = 5 acquire + release with every node answering at once (no I/O)."""
    with client.acquire("cycle", now) as op:
        outcome = drive(op, ffi.REPLY_OK, 0)
    with outcome:
        assert outcome.kind == "acquired"
        lease = outcome.lease()
    assert lease is not None
    with lease, client.release(lease, now + 100) as op:
        released = drive(op, ffi.REPLY_INTEGER, 1)
    with released:
        assert released.released >= client.quorum  # decided once a quorum confirmed


def drive(op: core.Operation, kind: int, integer: int) -> core.Outcome:
    sent = []
    while True:
        output = op.poll()
        if output == ffi.OUTPUT_SEND:
            sent.append(op.command().request_id)
        elif output == ffi.OUTPUT_OUTCOME:
            return op.take_outcome()
        elif output == ffi.OUTPUT_NONE:
            op.handle_reply(sent.pop(0), kind, 1_050, integer=integer)


def test_handles_are_freed(tmp_path: object) -> None:
    """40 000 cycles (each an operation, an outcome and a lease per step) leave the
    process's memory flat: nothing leaks."""
    script = f"""
import resource, sys
sys.path.insert(0, {str(REPO / "bindings" / "python")!r})
from tests.test_ctypes import run_cycle
from redlock_core import core
config = core.Config(5, 10_000)
client = core.Client(config)
def rss_kb():
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
for _ in range(10_000):
    run_cycle(client, 1000)
before = rss_kb()
for _ in range(30_000):
    run_cycle(client, 1000)
print(rss_kb() - before)
"""
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr
    growth_kb = int(result.stdout.strip())
    # A leak of even one small handle per cycle would be over a MiB here.
    assert growth_kb < 1024, f"RSS grew {growth_kb} KiB over 30 000 cycles"


def test_library_override_and_missing_library(tmp_path: object) -> None:
    env = dict(os.environ)
    env["REDLOCK_LIBRARY"] = "/nonexistent/libredlock.so"
    result = subprocess.run(
        [sys.executable, "-c", "import redlock_core"], capture_output=True, text=True, env=env
    )
    assert result.returncode != 0
    assert "LibraryNotFoundError" in result.stderr and "REDLOCK_LIBRARY" in result.stderr
    # A shared library that is not libredlock: the missing symbols are named, no crash.
    import _ctypes

    env["REDLOCK_LIBRARY"] = _ctypes.__file__
    result = subprocess.run(
        [sys.executable, "-c", "import redlock_core"], capture_output=True, text=True, env=env
    )
    assert result.returncode != 0 and "lacks redlock_client_new" in result.stderr
    # The override is what gets loaded.
    built = redlock_core.library_path()
    env["REDLOCK_LIBRARY"] = str(built)
    result = subprocess.run(
        [sys.executable, "-c", "import redlock_core; print(redlock_core.library_path())"],
        capture_output=True,
        text=True,
        env=env,
    )
    assert result.returncode == 0 and result.stdout.strip() == str(built)
