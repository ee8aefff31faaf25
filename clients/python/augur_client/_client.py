"""The client: a connection to one node (`Client`), its interactive sessions (`Session`) and
their transactions (`Transaction`)."""

from __future__ import annotations

import dataclasses
import math
import pathlib
import queue
import threading
import time
import tomllib
from types import TracebackType
from typing import Callable, Iterable, Iterator, Mapping, Optional, TypeVar, Union, cast

import grpc

from augur_client import augur_pb2, augur_pb2_grpc
from augur_client._errors import (
    Aborted,
    AugurError,
    DeadlineExceeded,
    RequestError,
    Unavailable,
    from_rpc_error,
    request_error,
)
from augur_client._retry import DEFAULT_ATTEMPTS, Backoff, retrying
from augur_client._values import Data, key_bytes, read_keys, value_bytes, write_pairs

T = TypeVar("T")

#: How long one request waits for the node's answer by default, in seconds. A node gives up on
#: a request it cannot answer after 10 s and says why; this leaves that answer time to arrive.
DEFAULT_TIMEOUT = 15.0


def _checked_timeout(timeout: float) -> float:
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
        raise TypeError(f"a timeout is a number of seconds, not {type(timeout).__name__}")
    if not (timeout > 0 and math.isfinite(timeout)):
        raise ValueError(f"a timeout must be a positive, finite number of seconds, not {timeout}")
    return float(timeout)


@dataclasses.dataclass(frozen=True)
class Committed:
    """A committed one-shot transaction: its commit timestamp and what each read saw (None for
    a key that holds no value)."""

    commit_ts: int
    reads: dict[bytes, Optional[bytes]]


@dataclasses.dataclass(frozen=True)
class Status:
    """Which node and cluster a client talks to."""

    node: int
    cluster_id: str
    protocol: str
    #: The fingerprint of the node's cluster configuration.
    fingerprint: str


class Client:
    """A connection to one node's gRPC API. Safe to share between threads; its sessions and
    transactions are not.

    Every request waits at most `timeout` seconds for its answer (the client's, overridable
    per call with `timeout=`), then raises `DeadlineExceeded`."""

    def __init__(
        self,
        target: str,
        *,
        token: Optional[str] = None,
        root_certificates: Optional[bytes] = None,
        server_name: Optional[str] = None,
        timeout: float = DEFAULT_TIMEOUT,
        node: Optional[int] = None,
    ):
        """Connect to `target` ("host:port", the node's gRPC address). With
        `root_certificates` (the cluster's CA, PEM) the connection uses TLS and checks that the
        node's certificate names `server_name` (augur nodes are "node-ID.augur"). `token` is the
        cluster's client token, if it requires one. `node` (the node's id) is only used to say
        which node an error is about."""
        if not isinstance(target, str) or not target:
            raise TypeError(f"target must be a 'host:port' string, not {target!r}")
        self.timeout = _checked_timeout(timeout)
        self.target = target
        self.name = f"node {node} at {target}" if node is not None else target
        if root_certificates is None:
            self._channel = grpc.insecure_channel(target)
        else:
            credentials = grpc.ssl_channel_credentials(root_certificates=root_certificates)
            options = []
            if server_name is not None:
                options.append(("grpc.ssl_target_name_override", server_name))
            self._channel = grpc.secure_channel(target, credentials, options=options)
        self._stub = augur_pb2_grpc.AugurStub(self._channel)  # type: ignore[no-untyped-call]
        self._metadata = [("authorization", f"Bearer {token}")] if token is not None else []

    @classmethod
    def from_cluster_file(
        cls,
        path: Union[str, pathlib.Path],
        node: int = 0,
        *,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> "Client":
        """Connect to node `node` of the cluster described by a cluster file (as written by
        `augur cluster init`): its gRPC address, and the cluster's CA and client token if it has
        them. Relative paths in the file are taken from the file's directory."""
        path = pathlib.Path(path)
        with open(path, "rb") as f:
            cluster = tomllib.load(f)
        base = path.parent
        nodes = cluster.get("nodes", [])
        entry = next((n for n in nodes if n.get("id") == node), None)
        if entry is None:
            ids = sorted(n.get("id") for n in nodes if isinstance(n.get("id"), int))
            raise ValueError(f"{path}: no node {node} (its nodes: {ids})")
        if "grpc" not in entry:
            raise ValueError(f"{path}: node {node} serves no gRPC API (its entry has no `grpc`)")
        host = entry["addr"].rsplit(":", 1)[0]
        port = entry["grpc"].rsplit(":", 1)[1]
        security = cluster.get("security", {})
        root_certificates = None
        if security.get("tls"):
            root_certificates = (base / security["ca"]).read_bytes()
        token = None
        if "client_token_file" in security:
            token = (base / security["client_token_file"]).read_text().strip()
        return cls(
            f"{host}:{port}",
            token=token,
            root_certificates=root_certificates,
            server_name=f"node-{node}.augur",
            timeout=timeout,
            node=node,
        )

    def close(self) -> None:
        """Close the connection (and every session on it)."""
        self._channel.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _timeout(self, timeout: Optional[float]) -> float:
        return self.timeout if timeout is None else _checked_timeout(timeout)

    def _unary(self, operation: str, method: Callable[..., T], request: object,
               timeout: Optional[float]) -> T:
        waited = self._timeout(timeout)
        try:
            return method(request, timeout=waited, metadata=self._metadata)
        except grpc.RpcError as error:
            # `from None`: the gRPC error's own traceback says nothing the message does not.
            raise from_rpc_error(
                error,
                node=self.name,
                operation=operation,
                timeout=waited,
                outcome_unknown=operation == "Transact" and _has_writes(request),
            ) from None

    def status(self, *, timeout: Optional[float] = None) -> Status:
        """Which node and cluster this is."""
        reply = self._unary("Status", self._stub.Status, augur_pb2.StatusRequest(), timeout)
        return Status(reply.node, reply.cluster_id, reply.protocol, reply.fingerprint)

    def wait_ready(self, within: float = 30.0) -> Status:
        """Wait until the node answers, for at most `within` seconds (for a cluster that is
        still starting); raises the last `Unavailable` or `DeadlineExceeded` if it never did."""
        deadline = time.monotonic() + _checked_timeout(within)
        while True:
            left = deadline - time.monotonic()
            try:
                return self.status(timeout=max(min(left, self.timeout), 0.001))
            except (Unavailable, DeadlineExceeded):
                if time.monotonic() + 0.1 > deadline:
                    raise
                time.sleep(0.1)

    def transact(
        self,
        reads: Iterable[Data] = (),
        writes: Optional[Mapping[Data, Optional[Data]]] = None,
        *,
        timeout: Optional[float] = None,
        trying_for: float = 0.0,
    ) -> Committed:
        """Run one transaction in one call: read `reads`, then write `writes` (a value of None
        deletes the key), then commit; read-only when there are no writes. Raises `Aborted` if
        it aborted (`retrying(lambda trying_for: client.transact(..., trying_for=trying_for))`
        runs it again while that may help). `trying_for`: seconds since the first attempt of
        this transaction began (see `retrying`)."""
        request = augur_pb2.TransactRequest(
            reads=read_keys(reads),
            writes=[augur_pb2.Write(key=k, value=v) for k, v in write_pairs(writes)],
            trying_for_us=_micros(trying_for),
        )
        reply = self._unary("Transact", self._stub.Transact, request, timeout)
        if reply.WhichOneof("outcome") == "aborted":
            raise _aborted(reply.aborted)
        return Committed(
            reply.committed.commit_ts,
            {kv.key: (kv.value if kv.HasField("value") else None) for kv in reply.reads},
        )

    def session(self) -> "Session":
        """An interactive session: one transaction at a time, on one stream to the node."""
        return Session(self)

    def begin(
        self,
        read_only: bool = False,
        *,
        timeout: Optional[float] = None,
        trying_for: float = 0.0,
    ) -> "Transaction":
        """Begin an interactive transaction in a session of its own, closed when the transaction
        ends. As a context manager it commits when the block ends normally and rolls back when
        it raises:

            with client.begin() as txn:
                txn.put("k", "v")

        See `Session.begin` for `timeout` and `trying_for`.
        """
        session = Session(self)
        try:
            txn = session.begin(read_only, timeout=timeout, trying_for=trying_for)
        except BaseException:
            session.close()
            raise
        txn._owns_session = True
        return txn

    def run(
        self,
        body: Callable[["Transaction"], T],
        *,
        attempts: int = DEFAULT_ATTEMPTS,
        backoff: Optional[Backoff] = None,
        read_only: bool = False,
        timeout: Optional[float] = None,
    ) -> T:
        """Run `body` in a transaction and commit it; while it aborts for a reason that may
        pass, wait as `backoff` says and run it again, at most `attempts` times in all. Returns
        what `body` returned. See `Session.run`."""
        with self.session() as session:
            return session.run(
                body, attempts=attempts, backoff=backoff, read_only=read_only, timeout=timeout
            )


def _micros(seconds: float) -> int:
    """`seconds` (at least 0) in whole microseconds, for a `trying_for_us` field."""
    if not seconds >= 0:
        raise ValueError(f"trying_for is a time since a first attempt, at least 0 s: {seconds}")
    return min(int(seconds * 1_000_000), 2**64 - 1)


def _has_writes(request: object) -> bool:
    return bool(getattr(request, "writes", None))


def _aborted(aborted: "augur_pb2.Aborted") -> Aborted:
    return Aborted(aborted.reason, aborted.description, aborted.retryable)


#: Put on a stream's request queue to end it, and on its reply queue when the node ended it.
_END = object()


class _Stream:
    """One `Session` call: requests go in through a queue, and a thread of its own reads the
    replies into another, so that waiting for a reply can be bounded (gRPC bounds a streaming
    call as a whole, not each of its messages)."""

    def __init__(self, client: Client):
        self._client = client
        self._requests: "queue.Queue[object]" = queue.Queue()
        self._replies: "queue.Queue[object]" = queue.Queue()
        self.closed = False
        self._call = client._stub.Session(self._pending(), metadata=client._metadata)
        self._reader = threading.Thread(target=self._read, name="augur-session", daemon=True)
        self._reader.start()

    def _pending(self) -> Iterator[augur_pb2.SessionRequest]:
        while True:
            request = self._requests.get()
            if request is _END:
                return
            yield cast(augur_pb2.SessionRequest, request)

    def _read(self) -> None:
        try:
            for reply in self._call:
                self._replies.put(reply)
            self._replies.put(_END)
        except grpc.RpcError as error:
            self._replies.put(error)

    def ask(
        self, operation: str, request: augur_pb2.SessionRequest, timeout: Optional[float]
    ) -> augur_pb2.SessionReply:
        """Send `request` and wait for its reply, for at most the timeout. Any error ends the
        stream (the node ends a session at its first error, rolling back its transaction)."""
        waited = self._client._timeout(timeout)
        node = self._client.name
        committing = operation == "commit"
        if self.closed:
            raise RuntimeError("this session's stream is closed")
        self._requests.put(request)
        try:
            reply = self._replies.get(timeout=waited)
        except queue.Empty:
            self.close()
            raise request_error(
                grpc.StatusCode.DEADLINE_EXCEEDED,
                "",
                node=node,
                operation=operation,
                timeout=waited,
                outcome_unknown=committing,
            ) from None
        except BaseException:
            # Interrupted (KeyboardInterrupt): the reply may still come, and would be taken
            # for the next request's.
            self.close()
            raise
        if isinstance(reply, augur_pb2.SessionReply):
            return reply
        self.close()
        if isinstance(reply, grpc.RpcError):
            raise from_rpc_error(
                reply, node=node, operation=operation, timeout=waited, outcome_unknown=committing
            ) from None
        raise request_error(
            grpc.StatusCode.UNAVAILABLE,
            "the node ended the session",
            node=node,
            operation=operation,
            timeout=waited,
            outcome_unknown=committing,
        )

    #: How long `close` waits for the reader thread to see the cancelled call end.
    _READER_JOIN = 5.0

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._requests.put(_END)
            self._call.cancel()
            # The reader holds the call's lock while it waits for a reply: left running, it
            # can be frozen holding it when the interpreter exits, and the call's finalizer
            # then waits for the lock for ever (a process that never ends). The cancelled
            # call ends its iteration at once.
            if threading.current_thread() is not self._reader:
                self._reader.join(self._READER_JOIN)


class Session:
    """An interactive session: one transaction at a time, each request answered in order.

    An error (a request that failed, or was not answered in time) ends the session's stream
    and rolls back its open transaction; the next `begin` opens a new stream. Not safe to share
    between threads: give each thread a session of its own."""

    def __init__(self, client: Client):
        self._client = client
        self._stream: Optional[_Stream] = None
        self._open: Optional[Transaction] = None

    def begin(
        self,
        read_only: bool = False,
        *,
        timeout: Optional[float] = None,
        trying_for: float = 0.0,
    ) -> "Transaction":
        """Begin a transaction (read-only if `read_only`); `timeout` bounds each of its
        requests (the client's by default). `trying_for`: seconds since the first attempt of
        this transaction began, when this is a retry (`run` passes it; see `retrying`): under
        wait-die the older transaction wins a conflict, so a retry that says how long it has
        been trying does not always die again. Raises `Aborted` if the node refused to begin
        one, and RuntimeError if one is still open in this session."""
        if self._open is not None and not self._open.done:
            raise RuntimeError(
                "a transaction is already open in this session: commit or roll it back first"
            )
        if self._stream is None or self._stream.closed:
            self._stream = _Stream(self._client)
        stream = self._stream
        request = augur_pb2.SessionRequest(
            begin=augur_pb2.Begin(read_only=read_only, trying_for_us=_micros(trying_for))
        )
        reply = stream.ask("begin", request, timeout)
        if reply.WhichOneof("reply") == "aborted":
            raise _aborted(reply.aborted)
        _expect(reply, "begun", "begin", self._client.name)
        self._open = Transaction(self, stream, reply.begun.snapshot, timeout)
        return self._open

    def run(
        self,
        body: Callable[["Transaction"], T],
        *,
        attempts: int = DEFAULT_ATTEMPTS,
        backoff: Optional[Backoff] = None,
        read_only: bool = False,
        timeout: Optional[float] = None,
    ) -> T:
        """Run `body(txn)` in a new transaction and commit it, and return what `body` returned.

        While an attempt aborts for a reason that may pass (`Aborted.retryable`), wait as
        `backoff` says (randomized exponential, `Backoff()` by default) and run `body` again in
        a new transaction, at most `attempts` times in all; `body` must therefore be safe to
        run more than once. Never retried: an abort that is not retryable (a rollback, a
        misspeculation, an invalid request), a `RequestError` (after a failed commit the
        transaction may have committed), and any exception `body` raises, which rolls the
        transaction back and propagates. If `body` rolls the transaction back itself, `run`
        returns what it returned without committing. `timeout` bounds each request."""

        def attempt(trying_for: float) -> T:
            with self.begin(read_only, timeout=timeout, trying_for=trying_for) as txn:
                return body(txn)

        return retrying(attempt, attempts=attempts, backoff=backoff)

    def close(self) -> None:
        """End the session (the node rolls back a transaction left open)."""
        if self._stream is not None:
            self._stream.close()
        if self._open is not None and not self._open.done:
            self._open._state = "rolled back"

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _expect(reply: augur_pb2.SessionReply, kind: str, operation: str, node: str) -> None:
    got = reply.WhichOneof("reply")
    if got != kind:
        raise AugurError(
            f"{node} answered {operation} with `{got}`, not `{kind}`: the client and the node "
            f"disagree about the API (is the client as new as the node?)"
        )


class Transaction:
    """One interactive transaction of a session. Writes are buffered by the node until
    `commit`. Every request takes a `timeout=` (seconds) that overrides the client's.

    As a context manager, it commits when the block ends normally (raising `Aborted` if the
    commit aborts, or if the transaction aborted inside the block) and rolls back when the
    block raises; the exception then propagates."""

    def __init__(
        self, session: Session, stream: _Stream, snapshot: int, timeout: Optional[float]
    ):
        self._session = session
        self._stream = stream
        #: The snapshot the transaction reads from (its meaning is the protocol's).
        self.snapshot = snapshot
        self._state = "open"
        self._aborted: Optional[Aborted] = None
        self._owns_session = False
        self._timeout = timeout

    @property
    def done(self) -> bool:
        """Whether the transaction has ended (committed, rolled back, aborted or failed)."""
        return self._state != "open"

    @property
    def state(self) -> str:
        """"open", "committed", "rolled back", "aborted" or "failed"."""
        return self._state

    def _end(self, state: str) -> None:
        self._state = state
        if self._owns_session:
            self._session.close()

    def _ask(
        self, operation: str, request: augur_pb2.SessionRequest, timeout: Optional[float]
    ) -> augur_pb2.SessionReply:
        if not self.done and self._stream.closed:
            # Its session was closed, and the node rolled it back.
            self._end("rolled back")
        if self.done:
            raise RuntimeError(f"this transaction has ended ({self._state}): begin a new one")
        try:
            reply = self._stream.ask(
                operation, request, self._timeout if timeout is None else timeout
            )
        except RequestError:
            self._end("failed")
            raise
        if reply.WhichOneof("reply") == "aborted":
            aborted = _aborted(reply.aborted)
            self._aborted = aborted
            self._end("rolled back" if aborted.reason == "user_rollback" else "aborted")
            raise aborted
        return reply

    def get(self, key: Data, *, timeout: Optional[float] = None) -> Optional[bytes]:
        """The value of `key`, or None if it holds none. Raises `Aborted` if the transaction
        aborted."""
        request = augur_pb2.SessionRequest(get=augur_pb2.Get(key=key_bytes(key)))
        reply = self._ask("get", request, timeout)
        _expect(reply, "value", "get", self._session._client.name)
        return reply.value.value if reply.value.HasField("value") else None

    def put(self, key: Data, value: Data, *, timeout: Optional[float] = None) -> None:
        """Write `value` (bytes or str) to `key` when the transaction commits."""
        put = augur_pb2.Put(key=key_bytes(key), value=value_bytes(value, key))
        reply = self._ask("put", augur_pb2.SessionRequest(put=put), timeout)
        _expect(reply, "written", "put", self._session._client.name)

    def delete(self, key: Data, *, timeout: Optional[float] = None) -> None:
        """Delete `key` when the transaction commits."""
        request = augur_pb2.SessionRequest(delete=augur_pb2.Delete(key=key_bytes(key)))
        reply = self._ask("delete", request, timeout)
        _expect(reply, "written", "delete", self._session._client.name)

    def commit(self, *, timeout: Optional[float] = None) -> int:
        """Commit; returns the commit timestamp, or raises `Aborted`. If it raises a
        `RequestError` instead, whether the transaction committed is unknown."""
        reply = self._ask("commit", augur_pb2.SessionRequest(commit=augur_pb2.Commit()), timeout)
        _expect(reply, "committed", "commit", self._session._client.name)
        self._end("committed")
        return reply.committed.commit_ts

    def rollback(self, *, timeout: Optional[float] = None) -> None:
        """Roll the transaction back: none of its writes take effect. Does nothing if it has
        already ended without committing; a committed transaction cannot be rolled back."""
        if self._state == "committed":
            raise RuntimeError("this transaction has committed: it cannot be rolled back")
        if self.done:
            return
        if self._stream.closed:
            self._end("rolled back")  # by the node, when its session was closed
            return
        request = augur_pb2.SessionRequest(abort=augur_pb2.Abort())
        try:
            reply = self._ask("rollback", request, timeout)
        except Aborted:
            return  # the answer to a rollback: the transaction is over, nothing took effect
        _expect(reply, "aborted", "rollback", self._session._client.name)

    #: The old name of `rollback`.
    abort = rollback

    def _rollback_quietly(self) -> None:
        """Roll back while another exception propagates: if the rollback fails, ending the
        session rolls the transaction back anyway."""
        try:
            self.rollback()
        except AugurError:
            self._stream.close()
            if not self.done:
                self._end("rolled back")

    def __enter__(self) -> "Transaction":
        return self

    def __exit__(
        self,
        exc_type: Optional[type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        try:
            if exc_type is not None:
                if not self.done:
                    self._rollback_quietly()
            elif not self.done:
                self.commit()
            elif self._state == "aborted" and self._aborted is not None:
                # The block caught the abort and went on: it must not look committed.
                raise self._aborted
        finally:
            if self._owns_session:
                self._session.close()
