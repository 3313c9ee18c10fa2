"""What the synchronous and asyncio drivers share: settings, the client and its
engine, the arguments of an acquisition, the procedures (acquire, inspect, and the
lock's own in :mod:`redlock_core._lock`), and outcomes turned into results and
exceptions.

A procedure is written once, without I/O, as a generator: it yields each
:class:`Step` (an operation to run to its outcome) and gets the outcome back, or the
exception the driver's I/O raised; what it returns is the caller's result. The
synchronous driver runs the steps on threads, the asyncio driver on the event loop
(:class:`Procedure` is the loop both use); neither knows what the steps mean.

Nothing here decides anything about the lock: settings become a core
:class:`~redlock_core.core.Config`, and each failed outcome becomes the one exception
its core error class maps to (see :mod:`redlock_core._errors`).
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Generator, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import (
    TYPE_CHECKING,
    Any,
    Callable,
    ClassVar,
    Generic,
    NamedTuple,
    TypedDict,
    TypeVar,
    Union,
    cast,
)
from urllib.parse import unquote, urlsplit

from redis.backoff import NoBackoff
from redis.sentinel import MasterNotFoundError

from . import _ffi
from ._errors import (
    ConfigError,
    LockError,
    LockHeldError,
    LockLostError,
    LockNotHeldError,
    NodeResult,
    NodesFailedError,
    UsageError,
    UsedAfterCloseError,
)
from ._handle import (
    connect_timeout_default_ms,
    invalid,
    names_text,
    quoted,
    sentinel_connect_timeout_ms,
    sentinel_query_timeout_default_ms,
    wrong_type,
)
from ._observe import Hook, Hooks, Observation, lost_event
from ._protocol import Action, Engine, NodeProtocol, Subscriber
from .core import (
    Client,
    Config,
    Lease,
    Operation,
    Outcome,
    Resources,
    duplicate_node,
    max_ttl_ms,
    micros,
    millis,
    now_us,
    resource_list,
)

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from ._lock import LockContextBase, LockState, OnLost

logger = logging.getLogger("redlock_core")

#: A driver's lock class and lock context class.
LockT = TypeVar("LockT", bound="LockState")
ContextT = TypeVar("ContextT", bound="LockContextBase")

#: A procedure's result.
T = TypeVar("T")
#: A driver's Redlock class, for the constructors the base class shares.
RedlockT = TypeVar("RedlockT", bound="RedlockBase[Any, Any]")

#: A duration in seconds: a number or a ``timedelta``.
Duration = Union[int, float, timedelta]


@dataclass(frozen=True)
class ReleaseResult:
    """How a release went: ``released`` nodes deleted a key holding the lock's token;
    ``confirmed`` is false when fewer than a quorum confirmed the keys are gone (the
    lock may then be held until its keys' TTL)."""

    released: int
    nodes: tuple[NodeResult, ...]
    confirmed: bool = True


class AcquireOptions(TypedDict, total=False):
    """The keyword arguments of ``acquire`` and ``lock``, the same on a
    :class:`~redlock_core.Redlock` and an :class:`~redlock_core.AsyncRedlock`:

    - ``ttl``: the lock's TTL (seconds, or a ``timedelta``) instead of the Redlock's;
    - ``blocking_timeout``: wait up to that long for the lock instead of making the
      configured attempts (the core's wait limit; release notices wake the wait as soon
      as a release makes success possible; 0: try once);
    - ``fencing``: overrides the Redlock's fencing setting for this lock (see
      ``Lock.fencing_token``);
    - ``auto_extend``: keep the lock alive in the background (a thread, or a task) as
      the core's keep-alive says; if the lock is lost, ``lock.lost`` becomes true,
      ``lock.check()`` raises, and ``on_lost`` is called with the
      :class:`~redlock_core.LockLostError`;
    - ``on_lost``: that callback (from the keep-alive's thread or task; a coroutine
      function's result is awaited on an AsyncRedlock).
    """

    ttl: Duration | None
    blocking_timeout: Duration | None
    fencing: bool | None
    auto_extend: bool
    on_lost: OnLost | None


@dataclass(frozen=True)
class AcquirePlan:
    """One acquisition as asked for: the resources as the caller named them and the
    options, defaults filled in. Both drivers' ``acquire`` and ``lock`` make one."""

    resources: Resources
    ttl: Duration | None = None
    blocking_timeout: Duration | None = None
    fencing: bool | None = None
    auto_extend: bool = False
    on_lost: OnLost | None = None

    @classmethod
    def of(cls, resources: Resources, options: Mapping[str, Any], caller: str) -> AcquirePlan:
        """The plan of ``caller(resources, **options)``; an unknown keyword is the
        ``TypeError`` Python gives for one."""
        for name in options:
            if name not in AcquireOptions.__annotations__:
                raise TypeError(f"{caller}() got an unexpected keyword argument {name!r}")
        return cls(resources, **options)


class Step(NamedTuple):
    """One operation a procedure needs run to its outcome by the driver's I/O:
    ``resources`` name it in events and spans."""

    op: Operation
    resources: Sequence[str | bytes]


#: A procedure: yields steps, is sent their outcomes, returns its result.
Steps = Generator[Step, Outcome, T]


class Procedure(Generic[T]):
    """Runs a procedure for a driver, which does only the I/O::

        with Procedure(steps) as procedure:
            while procedure.step is not None:
                procedure.send(drive(procedure.step))
        return procedure.result

    An exception out of the driver (an interrupt, a cancellation, a closed Redlock)
    goes into the procedure at its step, so that its operation is closed there; it
    propagates unless the procedure handles it and returns."""

    def __init__(self, steps: Steps[T]) -> None:
        self._steps = steps
        self.step: Step | None = None
        self._result: Any = None
        self._resume(lambda: next(steps))

    @property
    def result(self) -> T:
        """What the procedure returned (once ``step`` is None)."""
        return cast(T, self._result)

    def send(self, outcome: Outcome) -> None:
        """Hands the procedure its step's outcome; ``step`` becomes the next one."""
        self._resume(lambda: self._steps.send(outcome))

    def _resume(self, resume: Callable[[], Step]) -> None:
        try:
            self.step = resume()
        except StopIteration as done:
            self.step, self._result = None, done.value

    def __enter__(self) -> Procedure[T]:
        return self

    def __exit__(self, *exc_info: object) -> bool:
        exc = exc_info[1]
        if not isinstance(exc, BaseException) or self.step is None:
            return False
        try:
            self._resume(lambda: self._steps.throw(exc))
        except BaseException as error:
            if error is exc:
                return False
            raise
        if self.step is not None:
            raise RuntimeError("a procedure went on with another step after its driver failed")
        return True


def build_config(
    node_count: int,
    *,
    ttl: object,
    drift_factor: float | None,
    drift_fixed: object,
    node_timeout: object,
    min_validity: object,
    attempts: int | None,
    retry_delay: object,
    retry_jitter: object,
    key_prefix: str | bytes | None,
    token_bytes: int | None,
    max_extensions: int | None,
    fencing: bool = False,
) -> Config:
    """A core configuration from the drivers' settings (durations in seconds)."""

    def us(value: object, name: str) -> int | None:
        return None if value is None else micros(value, name)

    return Config(
        node_count,
        millis(ttl, "ttl", max_ttl_ms()),
        drift_factor=drift_factor,
        drift_fixed_us=us(drift_fixed, "drift_fixed"),
        node_timeout_us=us(node_timeout, "node_timeout"),
        min_validity_us=us(min_validity, "min_validity"),
        attempts=attempts,
        retry_delay_us=us(retry_delay, "retry_delay"),
        retry_jitter_us=us(retry_jitter, "retry_jitter"),
        token_bytes=token_bytes,
        max_extensions=max_extensions,
        key_prefix=key_prefix,
        fencing=fencing,
    )


def ttl_ms(ttl: object) -> int | None:
    return None if ttl is None else millis(ttl, "ttl", max_ttl_ms())


def _endpoint(client: Any) -> tuple[str, str] | None:
    """What a redis-py client connects to: ``("sentinel", service)`` for a client made
    by ``Sentinel.master_for``, ``("unix", path)``, ``("tcp", "host:port")``; None for
    something else."""
    pool = getattr(client, "connection_pool", None)
    service = getattr(pool, "service_name", None)
    if isinstance(service, str):
        return "sentinel", service
    kwargs = getattr(pool, "connection_kwargs", None)
    if not isinstance(kwargs, dict):
        return None
    if "path" in kwargs:
        return "unix", str(kwargs["path"])
    return "tcp", f"{kwargs.get('host', 'localhost')}:{kwargs.get('port', 6379)}"


def label_of(client: Any, index: int) -> str:
    """``host:port`` (or the socket path) of a redis-py client, for per-node detail;
    ``sentinel master SERVICE`` for a Sentinel's master."""
    endpoint = _endpoint(client)
    if endpoint is None:
        return f"node {index}"
    kind, where = endpoint
    return f"sentinel master {where}" if kind == "sentinel" else where


def check_clients(clients: Sequence[Any], kind: type, what: str) -> list[Any]:
    if isinstance(clients, (str, bytes)) or not hasattr(clients, "__iter__"):
        raise TypeError(f"clients must be a sequence of {what} clients")
    result = list(clients)
    if not result:
        raise invalid(
            "no_nodes", "clients must hold at least one client (one per Redis node), got none"
        )
    for index, client in enumerate(result):
        if not isinstance(client, kind):
            raise TypeError(f"clients[{index}] must be a {what}, not {type(client).__name__}")
        if not hasattr(client, "connection_pool"):
            raise TypeError(f"clients[{index}] has no connection pool")
    return result


# ---- outcomes ---------------------------------------------------------------------


def node_results(outcome: Outcome, labels: Sequence[str]) -> tuple[NodeResult, ...]:
    return tuple(
        NodeResult(
            index,
            labels[index] if index < len(labels) else f"node {index}",
            status,
            error,
            outcome.node_cause(index),
        )
        for index, (status, error) in enumerate(outcome.nodes())
    )


def _names(resources: Sequence[str | bytes]) -> str:
    return names_text(resources)


def _causes(nodes: Sequence[NodeResult]) -> str:
    causes = sorted({node.cause for node in nodes if node.cause})
    return f" ({', '.join(causes)})" if causes else ""


def acquire_error(
    outcome: Outcome, resources: Sequence[str | bytes], labels: Sequence[str]
) -> LockError:
    """The exception for a failed acquisition, by the core's error class."""
    reason = outcome.reason or "unknown"
    nodes = node_results(outcome, labels)
    if outcome.error_class == _ffi.ERROR_CLASS_HELD_ELSEWHERE:
        return LockHeldError(
            f"could not acquire {_names(resources)}: held by someone else",
            resources=resources,
            reason=reason,
            nodes=nodes,
            attempts=outcome.attempts,
        )
    why = {
        "nodes_failed": "too many nodes failed",
        "mixed": "conflicts and failing nodes left no quorum",
        "validity_too_short": "a quorum agreed too late (validity below the floor)",
    }.get(reason, reason)
    return NodesFailedError(
        f"could not acquire {_names(resources)}: {why}{_causes(nodes)}",
        resources=resources,
        reason=reason,
        nodes=nodes,
        attempts=outcome.attempts,
    )


def extend_error(
    outcome: Outcome, resources: Sequence[str | bytes], labels: Sequence[str]
) -> LockError:
    """The exception for a failed extension, by the core's error class."""
    reason = outcome.reason or "unknown"
    nodes = node_results(outcome, labels)
    error_class = outcome.error_class
    if error_class == _ffi.ERROR_CLASS_NOT_HELD:
        return LockNotHeldError(
            f"lock on {_names(resources)} is not held: its keys are gone",
            resources=resources,
            reason=reason,
            nodes=nodes,
        )
    if error_class == _ffi.ERROR_CLASS_LOCK_LOST:
        why = "another token holds it" if reason == "conflict" else "its lease ran out"
        return LockLostError(
            f"lock on {_names(resources)} is lost: {why}",
            resources=resources,
            reason=reason,
            nodes=nodes,
        )
    return NodesFailedError(
        f"could not extend {_names(resources)}: {reason}{_causes(nodes)}; still held on the "
        "old lease",
        resources=resources,
        reason=reason,
        nodes=nodes,
        valid_until_us=outcome.valid_until,
        retry_at_us=outcome.retry_at,
    )


def inspect_error(
    outcome: Outcome, resources: Sequence[str | bytes], labels: Sequence[str]
) -> LockError:
    """The exception for an inspection that could not say who holds the lock."""
    nodes = node_results(outcome, labels)
    return NodesFailedError(
        f"could not tell whether {_names(resources)} is held: too many nodes failed"
        f"{_causes(nodes)}",
        resources=resources,
        reason=outcome.reason or "nodes_failed",
        nodes=nodes,
    )


def release_result(outcome: Outcome, labels: Sequence[str]) -> ReleaseResult:
    return ReleaseResult(
        outcome.released or 0,
        node_results(outcome, labels),
        confirmed=outcome.error_class == 0,
    )


def call_on_lost(callback: Callable[[LockLostError], Any] | None, error: LockLostError) -> Any:
    logger.warning("%s", error)
    if callback is None:
        return None
    try:
        return callback(error)
    except Exception:  # a failing callback must not stop the signal
        logger.exception("the on_lost callback raised")
        return None


def shown(resources: Resources, names: list[bytes]) -> list[str | bytes]:
    """The resources as the caller named them, for messages and ``lock.resources``."""
    if isinstance(resources, (str, bytes)):
        return [resources]
    if isinstance(resources, (bytearray, memoryview)):
        return [bytes(resources)]
    return [item if isinstance(item, (str, bytes)) else bytes(item) for item in resources]


#: How long opening a node's connection (TCP, TLS, the client's handshake) may take,
#: in seconds, when the client sets no bound: the core's default, as in every binding.
OPEN_TIMEOUT = connect_timeout_default_ms() / 1000


#: The attribute of a client made by ``from_sentinel`` that holds its link's connect
#: timeout (ms): the core's ``sentinel_connect_timeout_ms``.
_SENTINEL_CONNECT_TIMEOUT = "_redlock_sentinel_connect_timeout_ms"


def connect_timeout_ms(client: Any) -> int | None:
    """The client's connect timeout (its ``socket_connect_timeout``) in whole
    milliseconds, rounded up, or ``None`` when it sets none: what the node's link gives
    a connection attempt before it gives it up (``None``: the core's default). Refused
    with ``TypeError``/``ValueError`` when it is not a duration.

    A client that :meth:`RedlockBase.from_sentinel` made carries its own: the core's
    composition of its Sentinels' bounds and the master's connect timeout."""
    through_sentinels = getattr(client, _SENTINEL_CONNECT_TIMEOUT, None)
    if isinstance(through_sentinels, int):
        return through_sentinels
    kwargs = getattr(getattr(client, "connection_pool", None), "connection_kwargs", None)
    value = kwargs.get("socket_connect_timeout") if isinstance(kwargs, dict) else None
    if value is None:
        return None
    return -(-micros(value, "socket_connect_timeout") // 1000)


def connection_like(client: Any, retry: Any, **overrides: Any) -> Any:
    """A new connection made like the client's own (TLS, password, database), with
    ``retry`` (none: the core's link decides about reconnecting) and a bounded time to
    open, whatever the client's settings; ``overrides`` replace other settings. The
    node's link decides when an attempt is given up (the client's connect timeout,
    :func:`connect_timeout_ms`, else the core's); these bounds only end the I/O of an
    attempt the driver cannot interrupt."""
    pool = client.connection_pool
    kwargs = dict(pool.connection_kwargs)
    kwargs["retry"] = retry
    kwargs.update(overrides)
    for name in ("socket_connect_timeout", "socket_timeout"):
        if kwargs.get(name) is None:
            kwargs[name] = OPEN_TIMEOUT
    return pool.connection_class(**kwargs)


def subscriber_like(client: Any, retry: Any) -> Any:
    """A new connection for release notices, made like the client's own but speaking
    RESP2, where messages are replies the core's decoder reads (RESP3 pushes are not),
    and so without redis-py's maintenance notifications, which need RESP3."""
    overrides: dict[str, Any] = {"protocol": 2}
    if "maint_notifications_config" in client.connection_pool.connection_kwargs:
        overrides["maint_notifications_config"] = None
    return connection_like(client, retry, **overrides)


def node_address(client: Any, index: int) -> str:
    """A redis-py client's server as an address the core compares (``host:port``,
    ``unix:PATH``, or ``sentinel:SERVICE`` for a Sentinel's master)."""
    endpoint = _endpoint(client)
    if endpoint is None:
        return f"unknown-{index}"
    kind, where = endpoint
    return where if kind == "tcp" else f"{kind}:{where}"


def parse_sentinels(
    sentinels: str | Sequence[str | tuple[str, int]],
) -> tuple[list[tuple[str, int]], dict[str, str]]:
    """The Sentinels' ``(host, port)`` pairs, from ``"host:port"`` strings,
    ``redis://[[user]:password@]host:port`` URLs or pairs (a string may list several,
    comma-separated), and the ``username`` and ``password`` their URLs give (``AUTH``
    on every Sentinel connection), as redis-py's ``sentinel_kwargs``: empty when none
    gives one. redis-py takes one login for all the Sentinels, so URLs that give
    different ones are refused (``ValueError``) rather than some of them dropped."""
    entries = _sentinel_entries(sentinels)
    logins = {login for _, login in entries}
    if len(logins) > 1:
        raise invalid(
            "invalid_sentinel",
            "the Sentinels' URLs give different credentials: give every Sentinel the same "
            "user and password (redis-py logs in to all of them alike)",
        )
    username, password = logins.pop()
    login = {}
    if username is not None:
        login["username"] = username
    if password is not None:
        login["password"] = password
    return [address for address, _ in entries], login


def _sentinel_entries(
    sentinels: str | Sequence[str | tuple[str, int]],
) -> list[tuple[tuple[str, int], tuple[str | None, str | None]]]:
    """Each Sentinel's ``(host, port)`` and the ``(username, password)`` of its URL."""
    if isinstance(sentinels, str):
        sentinels = [item for item in sentinels.split(",") if item.strip()]
    if isinstance(sentinels, bytes) or not hasattr(sentinels, "__iter__"):
        raise TypeError("sentinels must be addresses: 'host:port', redis:// URLs or pairs")
    result = []
    for item in sentinels:
        username = password = None
        if isinstance(item, str):
            text = item.strip()
            parts = urlsplit(text if "://" in text else f"redis://{text}")
            try:
                host, port = parts.hostname, parts.port
            except ValueError:
                host, port = None, None
            username = unquote(parts.username) if parts.username else None
            password = unquote(parts.password) if parts.password else None
            if username is not None and password is None:
                raise invalid(
                    "invalid_sentinel",
                    f"a Sentinel's URL names a user without a password: {quoted(item)}",
                )
        elif isinstance(item, tuple) and len(item) == 2:
            host, port = item
        else:
            raise wrong_type(
                f"a Sentinel's address must be 'host:port' or a pair, not {quoted(item)}"
            )
        if not isinstance(host, str) or not host or not isinstance(port, int) or port <= 0:
            raise invalid(
                "invalid_sentinel",
                f"a Sentinel's address needs a host and a port from 1 to 65535: {quoted(item)}",
            )
        result.append(((host, port), (username, password)))
    if not result:
        raise invalid("invalid_sentinel", "sentinels must name at least one Sentinel, got none")
    return result


class MasterSearch:
    """One search for the master of ``service``, without I/O: iterating gives each of
    ``manager``'s Sentinels in turn, until one named a master; the driver asks each
    (``SENTINEL get-master-addr-by-name``, which names the promoted replica as soon as
    a failover promoted it) and hands over the reply, or the error. The Redlock's
    ``Sentinel`` classes run it (``discover_master``), so that the node's error says
    what every Sentinel answered."""

    def __init__(self, manager: Any, service: str) -> None:
        self._sentinels = list(manager.sentinels)
        self.service = service
        self._index = 0
        self._answers: list[str] = []
        self._found: tuple[str, int] | None = None

    def __iter__(self) -> Iterator[Any]:
        for index, sentinel in enumerate(self._sentinels):
            self._index = index
            yield sentinel
            if self._found is not None:
                return

    def answer(self, reply: object) -> None:
        """What the current Sentinel replied (an exception: it could not be asked)."""
        where = f"Sentinel {label_of(self._sentinels[self._index], self._index)}"
        if isinstance(reply, BaseException):
            self._answers.append(f"{where} did not answer ({reply})")
        elif isinstance(reply, (list, tuple)) and len(reply) == 2:
            host, port = reply
            self._found = host.decode() if isinstance(host, bytes) else str(host), int(port)
        else:
            self._answers.append(f"{where} does not know the service")

    def master(self) -> tuple[str, int]:
        """The master's address, or the node's connection failure: no Sentinel named
        one."""
        if self._found is None:
            raise MasterNotFoundError(
                f"no Sentinel named a master for {self.service!r}: {'; '.join(self._answers)}"
            )
        return self._found


# ---- the part of a Redlock both drivers share -----------------------------------------


class RedlockBase(Generic[LockT, ContextT]):
    """Settings, the core client, the engine (links and operations), and turning
    outcomes into locks and exceptions. The drivers add waiting and I/O, and name
    their lock and lock context classes."""

    _closed = False
    #: Set when close() starts: from then on every call of the Redlock and of its locks
    #: raises UsedAfterCloseError, while close() releases the locks still held.
    _closing = False
    _lock_class: type[LockT]
    _context_class: type[ContextT]
    #: The driver's redis-py client class (and its name in errors), ``Sentinel`` and
    #: ``Retry`` classes (sync or asyncio).
    _client_class: ClassVar[type]
    _client_name: ClassVar[str]
    _sentinel_class: ClassVar[Callable[..., Any]]
    _retry_class: ClassVar[Callable[..., Any]]

    def __init__(
        self,
        clients: Sequence[Any],
        *,
        ttl: Duration = 10.0,
        drift_factor: float | None = None,
        drift_fixed: Duration | None = None,
        node_timeout: Duration | None = None,
        min_validity: Duration | None = None,
        attempts: int | None = None,
        retry_delay: Duration | None = None,
        retry_jitter: Duration | None = None,
        key_prefix: str | bytes | None = None,
        token_bytes: int | None = None,
        max_extensions: int | None = None,
        fencing: bool = False,
        notices: bool = True,
        on_event: Hook | None = None,
        seed: bytes | None = None,
    ) -> None:
        clients = check_clients(clients, self._client_class, self._client_name)
        self._node_clients = clients
        self._owned: list[Any] = []
        # The locks this Redlock handed out that the program still holds a reference
        # to: close() releases those not released yet. Weak, so that a lock its holder
        # dropped is not kept (nor kept alive) by the Redlock: its keys expire.
        self._locks: weakref.WeakSet[Any] = weakref.WeakSet()
        self._hooks = Hooks()
        if on_event is not None:
            self._hooks.add(on_event)
        if not isinstance(notices, bool):
            raise wrong_type(f"notices must be a bool, not {type(notices).__name__}")
        pair = duplicate_node([node_address(c, i) for i, c in enumerate(clients)])
        if pair is not None:
            raise ConfigError(
                _ffi.INVALID_INPUT,
                "duplicate_node",
                f"clients {pair[0]} and {pair[1]} are the same Redis server; Redlock needs "
                "independent nodes",
            )
        self._settings: dict[str, Any] = dict(
            ttl=ttl,
            drift_factor=drift_factor,
            drift_fixed=drift_fixed,
            node_timeout=node_timeout,
            min_validity=min_validity,
            attempts=attempts,
            retry_delay=retry_delay,
            retry_jitter=retry_jitter,
            key_prefix=key_prefix,
            token_bytes=token_bytes,
            max_extensions=max_extensions,
        )
        self._config: Config = build_config(len(clients), fencing=fencing, **self._settings)
        self._client = Client(self._config, seed=seed)
        self._seed = seed
        # The client of the other fencing setting, made on the first acquisition that
        # asks for it (same settings otherwise).
        self._other: Client | None = None
        self._labels = tuple(label_of(client, i) for i, client in enumerate(clients))
        # Each node's link gives a connection attempt the client's connect timeout (rule
        # 4), else the core's; a subscriber connection the longest of them.
        timeouts = [connect_timeout_ms(client) for client in clients]
        self._engine = Engine(
            self._labels,
            self._act,
            self._act_subscriber,
            connect_timeouts_ms=timeouts,
            subscriber_timeout_ms=max(
                connect_timeout_default_ms() if ms is None else ms for ms in timeouts
            ),
        )
        self._engine.notices = notices

    @classmethod
    def from_sentinel(
        cls: type[RedlockT],
        sentinels: str | Sequence[str | tuple[str, int]],
        service: str,
        *,
        sentinel_timeout: Duration | None = None,
        connection: Mapping[str, Any] | None = None,
        **settings: Any,
    ) -> RedlockT:
        """A single-instance lock (N = 1) on the master that the Redis Sentinels at
        ``sentinels`` (``"host:port"``, ``redis://[[user]:password@]host:port`` for
        Sentinels with a password of their own, the same for all of them, or
        ``(host, port)``; several in one string, comma-separated) name for
        ``service``. Every connection the node's link opens asks the Sentinels again
        (each in turn, until one names a master that is up), so after a failover the
        next reconnection reaches the new master. No Sentinel reachable, or a service
        they do not know, is a node failure (:class:`NodesFailedError`, its node's
        ``error`` saying which). Each Sentinel
        connects and answers within ``sentinel_timeout`` seconds or is skipped, like
        one that refused, and the next one is asked; ``None`` (the default) is the
        core's bound (``sentinel_query_timeout_default_ms``, 500 ms). The node's link
        gives a connection attempt the core's composition
        (``sentinel_connect_timeout_ms``): each Sentinel's bound in turn, then the
        master's connect timeout (``connection``'s ``socket_connect_timeout``, else the
        core's 2 s), the same in every binding. ``connection`` goes to the master's
        connections (``password``, ``ssl``, ``db``, ...); ``settings`` as for the
        constructor. The Sentinel clients are redis-py's, closed with the Redlock.

        Failover caveat (``docs/safety.md``, failover-before-replication): replication
        is asynchronous, so a failover before the key reached the replica loses the
        lock, and a second client can acquire it while the first still believes it
        holds it. Fencing tokens (``fencing=True``) keep the protected resource safe
        then; N independent nodes keep the lock itself."""
        if not isinstance(service, str) or not service:
            raise TypeError(f"service must be a non-empty str, not {service!r}")
        if sentinel_timeout is None:
            query_ms = sentinel_query_timeout_default_ms()
            timeout = query_ms / 1000
        else:
            timeout_us = micros(sentinel_timeout, "sentinel_timeout")
            query_ms = -(-timeout_us // 1000)  # whole milliseconds, rounded up
            timeout = timeout_us / 1e6
        addresses, sentinel_login = parse_sentinels(sentinels)
        manager = cls._sentinel_class(
            addresses,
            sentinel_kwargs={
                "socket_timeout": timeout,
                "socket_connect_timeout": timeout,
                "retry": cls._retry_class(NoBackoff(), 0),
                **sentinel_login,
            },
            **dict(connection or {}),
        )
        client = manager.master_for(service)
        # Every Sentinel may use its whole bound before the master's connection opens:
        # the link's connect timeout is the core's composition of the two.
        master_ms = connect_timeout_ms(client)
        setattr(
            client,
            _SENTINEL_CONNECT_TIMEOUT,
            sentinel_connect_timeout_ms(
                len(addresses),
                query_ms,
                connect_timeout_default_ms() if master_ms is None else master_ms,
            ),
        )
        redlock = cls([client], **settings)
        redlock._owned = [client, *manager.sentinels]
        return redlock

    def _act(self, node: NodeProtocol, actions: list[Action]) -> None:
        raise NotImplementedError

    def _act_subscriber(self, subscriber: Subscriber, actions: list[Action]) -> None:
        raise NotImplementedError

    @property
    def config(self) -> Config:
        """The core's configuration (read its settings; do not close it)."""
        return self._config

    @property
    def nodes(self) -> tuple[str, ...]:
        """Each node's label (``host:port``), as per-node detail names it."""
        return self._labels

    @property
    def quorum(self) -> int:
        return self._config.quorum

    @property
    def closed(self) -> bool:
        """True once ``close()`` was called (also while it releases the locks)."""
        return self._closing

    def add_listener(self, hook: Hook) -> Hook:
        """Calls ``hook`` with every :class:`~redlock_core.Event` of this Redlock's
        locks from now on (also ``on_event=`` of the constructor); returns it, so that
        it works as a decorator. Hooks run in the thread (or task) that runs the
        operation, or the auto-extension's; a hook that raises is logged (logger
        ``redlock_core``) and never affects the lock."""
        self._hooks.add(hook)
        return hook

    def remove_listener(self, hook: Hook) -> None:
        """Stops calling ``hook`` (``ValueError`` if it was never added)."""
        self._hooks.remove(hook)

    def _observe(self, step: Step) -> Observation:
        """The hooks' and the span's view of one step's operation."""
        name = _ffi.OPERATION_NAMES.get(step.op.kind, "operation")
        return Observation(self._hooks, self._labels, name, step.resources, self.quorum)

    def _report_lost(
        self,
        resources: tuple[str | bytes, ...],
        reason: str,
        nodes: tuple[NodeResult, ...],
        held_since_us: int,
    ) -> None:
        """The keep-alive reported a lock lost: the ``lost`` event, its ``elapsed``
        from the lock's acquisition."""
        if self._hooks:
            self._hooks.emit(lost_event(resources, reason, nodes, held_since_us))

    def _start_inspect(self, names: list[bytes]) -> Operation:
        return self._usable().inspect(names, now_us())

    def _inspected(
        self, outcome: Outcome, resources: Sequence[str | bytes], lease: Lease | None = None
    ) -> bool:
        """Whether an inspection found the lock held (by ``lease``, when given, at
        now), or the exception for one that could not say."""
        with outcome:
            if outcome.kind != "inspected":
                raise inspect_error(outcome, resources, self._labels)
            if lease is None:
                return outcome.is_locked
            return outcome.is_held_by(lease, now_us())

    def _usable(self) -> Client:
        if self._closing:
            raise self._closed_error()
        return self._client

    def _closed_error(self) -> UsedAfterCloseError:
        return UsedAfterCloseError(f"this {type(self).__name__} is closed")

    def _held_at_close(self) -> list[tuple[LockT, Step]]:
        """When close() starts: every lock still held, its keep-alive stopped, with the
        release operation that close() runs for it (all of them at once)."""
        held = []
        for lock in list(self._locks):
            if lock._released is not None:
                continue
            lock._stop_keepalive()
            step = Step(self._client.release(lock._lease, now_us()), lock._resources)
            held.append((lock, step))
        return held

    def _check_ttl(self, ttl: Duration | None) -> int | None:
        """The per-call TTL in ms, refused with the rule it breaks."""
        value = ttl_ms(ttl)
        if value is not None:
            try:
                self._client.check_ttl(value)
            except ConfigError as error:
                raise UsageError(
                    error.result,
                    "invalid_ttl",
                    f"a TTL of {value} ms does not fit this configuration: {error.message}",
                ) from None
        return value

    def lock(self, resources: Resources, **options: Unpack[AcquireOptions]) -> ContextT:
        """``with redlock.lock("name") as lock:`` (``async with`` for an
        ``AsyncRedlock``) acquires on entry, with the arguments of ``acquire`` (see
        :class:`AcquireOptions`), and releases on exit."""
        return self._context_class(self, AcquirePlan.of(resources, options, "lock"))

    def from_token(self, resources: Resources, token: str) -> LockT:
        """A lock rebuilt from a token kept elsewhere (another process, a command
        line), to extend or release it. Its validity is unknown until extended."""
        names = resource_list(resources)
        lease = self._usable().lease(names, token, 0)
        return self._lock_class(self, shown(resources, names), lease, None, (), False, None)

    def _client_for(self, fencing: bool | None) -> Client:
        """The core client of this acquisition: the configured one, or (``fencing``
        other than configured) one built with the same settings and that fencing."""
        client = self._usable()
        if fencing is None or fencing == self._config.fencing:
            return client
        if not isinstance(fencing, bool):
            raise wrong_type(f"fencing must be a bool, not {type(fencing).__name__}")
        if self._other is None:
            config = build_config(len(self._labels), fencing=fencing, **self._settings)
            self._other = Client(config, seed=self._seed)
            config.close()  # the client holds its own copy
        return self._other

    def _acquire_steps(self, resources: Resources, options: Mapping[str, Any]) -> Steps[LockT]:
        """The procedure of ``acquire(resources, **options)``."""
        return self._acquiring(AcquirePlan.of(resources, options, "acquire"))

    def _acquiring(self, plan: AcquirePlan) -> Steps[LockT]:
        """The acquisition procedure: the lock, or the exception its outcome means."""
        names = resource_list(plan.resources)
        resources = shown(plan.resources, names)
        client = self._client_for(plan.fencing)
        limit = plan.blocking_timeout
        wait = None if limit is None else micros(limit, "blocking_timeout")
        ttl = self._check_ttl(plan.ttl)
        with client.acquire(names, now_us(), ttl_ms=ttl, wait_us=wait) as op:
            outcome = yield Step(op, resources)
        lease, attempts, nodes = self._acquired(outcome, resources)
        if self._closing:
            # close() started while this acquisition ran, after it looked for the locks
            # to release: release this one too, and refuse.
            released = yield Step(self._client.release(lease, now_us()), resources)
            released.close()
            raise UsedAfterCloseError(
                f"this {type(self).__name__} was closed while the acquisition ran (the lock "
                "was released)"
            )
        return self._lock_class(
            self, resources, lease, attempts, nodes, plan.auto_extend, plan.on_lost
        )

    def _inspecting(self, resources: Resources) -> Steps[bool]:
        """The inspection procedure behind ``locked``."""
        names = resource_list(resources)
        named = shown(resources, names)
        with self._start_inspect(names) as op:
            outcome = yield Step(op, named)
        return self._inspected(outcome, named)

    def _acquired(
        self, outcome: Outcome, resources: Sequence[str | bytes]
    ) -> tuple[Lease, int | None, tuple[NodeResult, ...]]:
        """The lease, attempts and per-node detail of an acquired outcome, or the
        exception its error class says."""
        with outcome:
            if outcome.kind != "acquired":
                raise acquire_error(outcome, resources, self._labels)
            lease = outcome.lease()
            assert lease is not None  # an acquired outcome always has a lease
            return lease, outcome.attempts, node_results(outcome, self._labels)

    def _close_owned(self) -> None:
        for client in self._owned:
            close = getattr(client, "close", None)
            if close is not None:
                result = close()
                if hasattr(result, "close"):  # an un-awaited coroutine: drop it quietly
                    result.close()

    def __repr__(self) -> str:
        ttl = self._config.ttl_ms
        return (
            f"<{type(self).__name__} {len(self._labels)} nodes, quorum {self.quorum}, ttl {ttl} ms>"
        )
