"""Every conformance vector in tests/vectors/ (and the RESP decoder's in resp/) replayed
through ctypes, with the checks of core/tests/vectors.rs: each step's outputs, written
as the vectors write them, must equal the expected ones; errors by their codes."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

import pytest

from redlock_core import CoreError, core
from redlock_core import _ffi as ffi

from .conftest import REPO

VECTORS = REPO / "tests" / "vectors"
VECTOR_FILES = sorted(VECTORS.glob("*.json"))
# Fencing, wait limits with release notices, and inspections, replayed the same way.
FEATURE_FILES = sorted(
    [
        *VECTORS.glob("fencing/*.json"),
        *VECTORS.glob("waiting/*.json"),
        *VECTORS.glob("inspect/*.json"),
    ]
)
# The keep-alive state machine driven by the outcomes of the same file's operations.
KEEPALIVE_FILES = sorted(VECTORS.glob("keepalive/*.json"))
RESP_FILES = sorted((VECTORS / "resp").glob("*.json"))

PLACEHOLDERS = {
    "{{ACQUIRE_SCRIPT}}": core.script_text(ffi.SCRIPT_ACQUIRE),
    "{{RELEASE_SCRIPT}}": core.script_text(ffi.SCRIPT_RELEASE),
    "{{EXTEND_SCRIPT}}": core.script_text(ffi.SCRIPT_EXTEND),
    "{{FENCED_ACQUIRE_SCRIPT}}": core.script_text(ffi.SCRIPT_FENCED_ACQUIRE),
    "{{WRITE_BACK_SCRIPT}}": core.script_text(ffi.SCRIPT_WRITE_BACK),
}


def config_from(value: dict[str, Any]) -> core.Config:
    return core.Config(
        value["nodes"],
        value["ttl_ms"],
        drift_factor=value.get("drift_factor"),
        drift_fixed_us=value.get("drift_fixed_us"),
        node_timeout_us=value.get("node_timeout_us"),
        min_validity_us=value.get("min_validity_us"),
        attempts=value.get("attempts"),
        retry_delay_us=value.get("retry_delay_us"),
        retry_jitter_us=value.get("retry_jitter_us"),
        key_prefix=value.get("key_prefix"),
        token_bytes=value.get("token_bytes"),
        fencing=value.get("fencing"),
    )


def reply_from(value: dict[str, Any]) -> core.Reply:
    kind = ffi.REPLY_KINDS[value["type"]]
    if kind == ffi.REPLY_ARRAY:
        items = [reply_from(item) for item in value["value"]]
        try:
            return core.Reply.array(items)
        finally:
            for item in items:
                item.close()
    if kind == ffi.REPLY_INTEGER:
        return core.Reply.new(kind, integer=value["value"])
    text = value.get("value")
    return core.Reply.new(kind, text=None if text is None else text.encode())


def reply_to_json(reply: core.Reply) -> dict[str, Any]:
    kind = ffi.REPLY_NAMES[reply.kind]
    out: dict[str, Any] = {"type": kind}
    if kind == "integer":
        out["value"] = reply.integer
    elif kind == "array":
        items = reply.items()
        out["value"] = [reply_to_json(item) for item in items]
        for item in items:
            item.close()
    else:
        data = reply.bytes
        if data is not None:
            out["value"] = data.decode("utf-8", "replace")
    return out


def nodes_to_json(nodes: list[tuple[str, str | None]]) -> list[Any]:
    return [{"error": error} if status == "error" else status for status, error in nodes]


def outcome_to_json(outcome: core.Outcome) -> dict[str, Any]:
    kind = outcome.kind
    nodes = nodes_to_json(outcome.nodes())
    if kind == "acquired":
        acquired = {
            "kind": kind,
            "token": outcome.token,
            "valid_until": outcome.valid_until,
            "validity": outcome.validity,
            "attempts": outcome.attempts,
            "nodes": nodes,
        }
        fencing_token = outcome.fencing_token
        if fencing_token is not None:
            # The lease carries the same token.
            with outcome.lease() as lease:  # type: ignore[union-attr]
                assert lease.fencing_token == fencing_token
            acquired["fencing_token"] = fencing_token
        return acquired
    if kind == "not_acquired":
        return {
            "kind": kind,
            "reason": outcome.reason,
            "attempts": outcome.attempts,
            "token": outcome.token,
            "nodes": nodes,
        }
    if kind == "extended":
        return {
            "kind": kind,
            "token": outcome.token,
            "valid_until": outcome.valid_until,
            "validity": outcome.validity,
            "extensions": outcome.extensions,
            "nodes": nodes,
        }
    if kind == "not_extended":
        return {
            "kind": kind,
            "reason": outcome.reason,
            "valid_until": outcome.valid_until,
            "validity": outcome.validity,
            "retry_at": outcome.retry_at,
            "nodes": nodes,
        }
    if kind in ("released", "not_released"):
        return {"kind": kind, "released": outcome.released, "nodes": nodes}
    if kind == "inspected":
        # Locked exactly when someone holds it.
        assert outcome.is_locked == (outcome.holder is not None)
        return {"kind": kind, "holder": outcome.holder, "nodes": nodes}
    if kind == "not_inspected":
        assert outcome.holder is None and not outcome.is_locked
        return {"kind": kind, "nodes": nodes}
    raise AssertionError(f"unexpected outcome {kind}")


def expand(value: Any) -> Any:
    if isinstance(value, str):
        return PLACEHOLDERS.get(value, value)
    if isinstance(value, list):
        return [expand(item) for item in value]
    if isinstance(value, dict):
        return {key: expand(item) for key, item in value.items()}
    return value


class Replay:
    def __init__(self, client: core.Client) -> None:
        self.client = client
        self.ops: dict[str, core.Operation] = {}
        self.leases: dict[str, core.Lease] = {}
        # The last outcome each operation handed out (for ``keepalive_outcome``).
        self.outcomes: dict[str, core.Outcome] = {}
        self.keepalives: dict[str, core.KeepAlive] = {}
        self.last: str | None = None

    def keep_lease(self, name: str, lease: core.Lease) -> None:
        old = self.leases.get(name)
        self.leases[name] = lease
        if old is not None:
            old.close()

    def drain(self, name: str) -> list[Any]:
        op = self.ops[name]
        outputs: list[Any] = []
        while True:
            kind = op.poll()
            if kind == ffi.OUTPUT_NONE:
                break
            if kind == ffi.OUTPUT_SEND:
                command = op.command()
                argv = [arg.decode("utf-8", "replace") for arg in command.argv]
                # Every way of reading a command must agree.
                assert [op.command_arg(i) for i in range(len(argv))] == list(command.argv)
                assert op.command_resp() == resp_encode(command.argv)
                outputs.append(
                    {
                        "send": {
                            "node": command.node,
                            "request": command.request_id,
                            "deadline": command.deadline,
                            "argv": argv,
                        }
                    }
                )
            elif kind == ffi.OUTPUT_WAIT:
                outputs.append({"wait": op.wait_until()})
            elif kind == ffi.OUTPUT_OUTCOME:
                # Kept (closed with the replay) for ``keepalive_outcome`` steps.
                outcome = op.take_outcome()
                old = self.outcomes.get(name)
                self.outcomes[name] = outcome
                if old is not None:
                    old.close()
                outputs.append({"outcome": outcome_to_json(outcome)})
                lease = outcome.lease()
                if lease is not None:
                    self.keep_lease(name, lease)
            else:
                raise AssertionError(f"unknown output kind {kind}")
            assert len(outputs) < 10_000, "outputs never end"
        return outputs

    def keepalive_step(self, step: dict[str, Any]) -> list[Any] | None:
        """A keep-alive step (``keepalive``, ``keepalive_outcome``, ``keepalive_failure``,
        ``keepalive_stop``, ``keepalive_poll``): its input, then one poll at ``now``;
        ``None`` for a step of another kind. The keep-alive's lease afterwards is kept
        under its name, for extensions of it (core/tests/vectors.rs keepalive_step)."""
        name = step.get("name")
        if name is None:
            return None
        now = step.get("now", 0)
        if "keepalive" in step:
            old = self.keepalives.get(name)
            self.keepalives[name] = core.KeepAlive(
                self.client, self.leases[step["keepalive"]["lease"]]
            )
            if old is not None:
                old.close()
        elif "keepalive_outcome" in step:
            op = step["keepalive_outcome"]["op"]
            assert op in self.outcomes, f"no outcome of {op}"
            self.keepalives[name].handle_outcome(self.outcomes[op], now)
        elif "keepalive_failure" in step:
            self.keepalives[name].handle_failure(now)
        elif "keepalive_stop" in step:
            self.keepalives[name].stop()
        elif "keepalive_poll" not in step:
            return None
        keepalive = self.keepalives[name]
        action = keepalive.poll(now)
        lease = keepalive.lease()
        self.keep_lease(name, lease)
        return [keepalive_action_to_json(action), {"valid_until": lease.valid_until}]

    def step(self, step: dict[str, Any]) -> tuple[str | None, list[Any]]:
        now = step.get("now", 0)
        name = step.get("op")
        keepalive_outputs = self.keepalive_step(step)
        if keepalive_outputs is not None:
            return None, keepalive_outputs
        if "acquire" in step:
            args = step["acquire"]
            wait_ms = args.get("wait_ms")
            try:
                op = self.client.acquire_with_random(
                    args["resources"],
                    bytes.fromhex(args["random"]),
                    now,
                    wait_us=None if wait_ms is None else wait_ms * 1000,
                )
            except CoreError as error:
                return error.code, []
            assert name is not None
            self.ops[name] = op
            self.last = name
        elif "extend" in step or "release" in step:
            args = step.get("extend") or step["release"]
            lease = self.leases[args["lease"]]
            try:
                if "extend" in step:
                    op = self.client.extend(lease, now, ttl_ms=args.get("ttl_ms"))
                else:
                    op = self.client.release(lease, now)
            except CoreError as error:
                return error.code, []
            assert name is not None
            self.ops[name] = op
            self.last = name
        elif "inspect" in step:
            try:
                op = self.client.inspect(step["inspect"]["resources"], now)
            except CoreError as error:
                return error.code, []
            assert name is not None
            self.ops[name] = op
            self.last = name
        elif "lease" in step:
            args = step["lease"]
            try:
                lease = self.client.lease(
                    args["resources"], args["token"], args.get("valid_until", 0)
                )
            except CoreError as error:
                return error.code, []
            self.leases[step["name"]] = lease
            return None, []
        elif "reply" in step:
            name = name or self.last
            assert name is not None
            args = step["reply"]
            error_code = None
            value = args["value"]
            try:
                if value["type"] == "array":
                    with reply_from(value) as reply:
                        self.ops[name].handle_reply_value(args["request"], reply, now)
                else:
                    # Parts, as a client library hands them over.
                    kind = ffi.REPLY_KINDS[value["type"]]
                    integer = value["value"] if kind == ffi.REPLY_INTEGER else 0
                    text = value.get("value") if kind != ffi.REPLY_INTEGER else None
                    self.ops[name].handle_reply(
                        args["request"],
                        kind,
                        now,
                        integer=integer,
                        text=None if text is None else text.encode(),
                    )
            except CoreError as error:
                error_code = error.code
            return error_code, self.drain(name)
        elif "timeout" in step:
            name = name or self.last
            assert name is not None
            self.ops[name].handle_timeout(now)
        elif "notice" in step:
            name = name or self.last
            assert name is not None
            op = self.ops[name]
            # Every channel an acquisition names is one of its keys': its notice channel,
            # or (a waiter) its waiter channel, named by the waiter id's first 16
            # characters (one listener id for all of them).
            channels = op.notice_channels()
            listeners = {c[15:31] for c in channels if c.startswith(b"redlock:waiter:")}
            assert len(listeners) <= 1, channels
            assert all(
                c.startswith(b"redlock:released:")
                or re.fullmatch(rb"redlock:waiter:[0-9a-f]{16}:.+", c, re.S)
                for c in channels
            ), channels
            notice = step["notice"]
            try:
                # ``message``: the text the notice carried; without it, the bare notice.
                if "message" in notice:
                    op.handle_notice_message(notice["node"], notice["message"].encode(), now)
                else:
                    op.handle_notice(notice["node"], now)
            except CoreError as error:
                return error.code, []
        elif "subscribed" in step:
            name = name or self.last
            assert name is not None
            try:
                self.ops[name].handle_subscribed(step["subscribed"]["node"], now)
            except CoreError as error:
                return error.code, []
        elif "abandon" in step:
            name = name or self.last
            assert name is not None
            self.ops[name].abandon(now)
        else:
            raise AssertionError(f"unknown step {step}")
        return None, self.drain(name)

    def close(self) -> None:
        for op in self.ops.values():
            op.close()
        for lease in self.leases.values():
            lease.close()
        for outcome in self.outcomes.values():
            outcome.close()
        for keepalive in self.keepalives.values():
            keepalive.close()
        self.client.close()


def keepalive_action_to_json(action: core.KeepAliveAction) -> Any:
    if action.action == ffi.KEEPALIVE_EXTEND:
        return {"extend": {}}
    if action.action == ffi.KEEPALIVE_WAIT:
        return {"wait": action.until}
    if action.action == ffi.KEEPALIVE_LOST:
        return {"lost": action.lost}
    if action.action == ffi.KEEPALIVE_STOPPED:
        return {"stopped": {}}
    raise AssertionError(f"unexpected keep-alive action {action}")


def resp_encode(argv: tuple[bytes, ...]) -> bytes:
    out = [b"*%d\r\n" % len(argv)]
    for arg in argv:
        out.append(b"$%d\r\n%s\r\n" % (len(arg), arg))
    return b"".join(out)


def test_there_are_vectors() -> None:
    assert len(VECTOR_FILES) >= 40, f"only {len(VECTOR_FILES)} vectors"
    assert {p.parent.name for p in FEATURE_FILES} == {"fencing", "waiting", "inspect"}
    assert len(RESP_FILES) >= 10, f"only {len(RESP_FILES)} RESP vectors"
    # A moved keep-alive folder must not pass as "nothing failed".
    assert len(KEEPALIVE_FILES) >= 4, f"only {len(KEEPALIVE_FILES)} keep-alive vectors"
    # Notices that carry a message (the waiter first in the queue) are replayed too.
    named = [p for p in FEATURE_FILES if '"message"' in p.read_text()]
    assert len(named) >= 2, f"only {len(named)} vectors with a notice's message"


@pytest.mark.parametrize(
    "path",
    VECTOR_FILES + FEATURE_FILES + KEEPALIVE_FILES,
    ids=[p.stem for p in VECTOR_FILES]
    + [f"{p.parent.name}/{p.stem}" for p in FEATURE_FILES + KEEPALIVE_FILES],
)
def test_conformance_vector(path: Path) -> None:
    vector = json.loads(path.read_text())
    assert vector["name"] == path.stem, "name does not match the file name"
    for field in ("description", "why"):
        assert vector.get(field), f"missing {field}"
    if "config_error" in vector:
        with pytest.raises(CoreError) as raised:
            config_from(vector["config"])
        assert raised.value.code == vector["config_error"]
        return
    with config_from(vector["config"]) as config:
        replay = Replay(core.Client(config, seed=bytes(32)))
    try:
        for index, step in enumerate(vector["steps"]):
            error, outputs = replay.step(step)
            assert error == step.get("error"), f"step {index}: error {error!r}"
            if "lease" in step:
                continue
            assert outputs == expand(step["expect"]), f"step {index}: outputs differ"
            if "listens" in step:
                # Whether the operation listens for release notices now (the core says).
                name = step.get("op") or replay.last
                assert name is not None
                assert replay.ops[name].listens is step["listens"], f"step {index}: listens"
    finally:
        replay.close()


@pytest.mark.parametrize("path", RESP_FILES, ids=[p.stem for p in RESP_FILES])
def test_resp_vector(path: Path) -> None:
    vector = json.loads(path.read_text())
    replies: list[Any] = []
    error = None
    with core.Decoder() as decoder:
        for chunk in vector["chunks"]:
            decoder.feed(bytes.fromhex(chunk))
            try:
                while True:
                    reply = decoder.next_reply()
                    if reply is None:
                        break
                    with reply:
                        replies.append(reply_to_json(reply))
            except CoreError as raised:
                error = raised.code
                break
    assert replies == vector["replies"]
    assert error == vector["error"]


def test_script_sha1s_match_their_texts() -> None:
    for script in (
        ffi.SCRIPT_ACQUIRE,
        ffi.SCRIPT_RELEASE,
        ffi.SCRIPT_EXTEND,
        ffi.SCRIPT_FENCED_ACQUIRE,
        ffi.SCRIPT_WRITE_BACK,
        ffi.SCRIPT_FENCED_SET,
        ffi.SCRIPT_QUEUED_ACQUIRE,
    ):
        text = core.script_text(script)
        assert hashlib.sha1(text.encode()).hexdigest() == core.script_sha1(script)
