"""A Python client for augur, over the gRPC API every node serves (proto/augur/v1/augur.proto).

    from augur_client import Client

    with Client.from_cluster_file("cluster.toml") as client:
        client.transact(writes={"acct:alice": "100"})
        with client.session() as session:
            txn = session.begin()
            balance = int(txn.get("acct:alice"))
            txn.put("acct:alice", str(balance - 30))
            txn.commit()

Keys and values are bytes (a str is taken as its UTF-8 bytes). A transaction that aborts
raises `Aborted`, which says why and whether running it again may succeed (`retryable`); the
`run` helpers retry those for you. Errors the node could not answer (a bad request, a missing
token, a node that is down) are `grpc.RpcError`s, as gRPC raises them.

The stubs this package imports are generated from the .proto by `generate.py`.
"""

from __future__ import annotations

import dataclasses
import pathlib
import queue
import time
import tomllib
from typing import Callable, Iterable, Mapping, Optional, TypeVar, Union

import grpc

try:
    from augur_client import augur_pb2, augur_pb2_grpc
except ImportError as missing:  # pragma: no cover - a setup step, said plainly
    raise ImportError(
        "the augur gRPC stubs are not generated: run `python3 clients/python/generate.py`"
    ) from missing

__all__ = ["Aborted", "Client", "Session", "Transaction", "Committed", "Status"]

Bytes = Union[bytes, str]
T = TypeVar("T")

#: How long one request may wait for the node, in seconds.
DEFAULT_TIMEOUT = 10.0


def _bytes(value: Bytes) -> bytes:
    return value.encode() if isinstance(value, str) else bytes(value)


class Aborted(Exception):
    """The transaction aborted: `reason` is a stable name (e.g. "write_write_conflict"),
    `description` says what happened in words, `retryable` whether running it again may
    succeed."""

    def __init__(self, reason: str, description: str, retryable: bool):
        super().__init__(f"aborted: {description} ({reason})")
        self.reason = reason
        self.description = description
        self.retryable = retryable

    @classmethod
    def _from(cls, aborted: "augur_pb2.Aborted") -> "Aborted":
        return cls(aborted.reason, aborted.description, aborted.retryable)


@dataclasses.dataclass(frozen=True)
class Committed:
    """A committed one-shot transaction: its commit timestamp and what each read saw."""

    commit_ts: int
    reads: dict[bytes, Optional[bytes]]


@dataclasses.dataclass(frozen=True)
class Status:
    node: int
    cluster_id: str
    protocol: str
    fingerprint: str


class Client:
    """A connection to one node's gRPC API."""

    def __init__(
        self,
        target: str,
        *,
        token: Optional[str] = None,
        root_certificates: Optional[bytes] = None,
        server_name: Optional[str] = None,
        timeout: float = DEFAULT_TIMEOUT,
    ):
        """Connect to `target` ("host:port"). With `root_certificates` (the cluster's CA, PEM)
        the connection uses TLS and checks that the node's certificate names `server_name`
        (augur nodes are named "node-ID.augur"). `token` is the cluster's client token, if it
        requires one."""
        if root_certificates is None:
            self._channel = grpc.insecure_channel(target)
        else:
            credentials = grpc.ssl_channel_credentials(root_certificates=root_certificates)
            options = []
            if server_name is not None:
                options.append(("grpc.ssl_target_name_override", server_name))
            self._channel = grpc.secure_channel(target, credentials, options=options)
        self._stub = augur_pb2_grpc.AugurStub(self._channel)
        self._metadata = [("authorization", f"Bearer {token}")] if token is not None else []
        self.timeout = timeout

    @classmethod
    def from_cluster_file(
        cls, path: Union[str, pathlib.Path], node: int = 0, timeout: float = DEFAULT_TIMEOUT
    ) -> "Client":
        """Connect to node `node` of the cluster described by a cluster file (as written by
        `augur cluster init`): its gRPC port, the cluster's CA and client token if it has them.
        Relative paths in the file are taken from the file's directory."""
        path = pathlib.Path(path)
        with open(path, "rb") as f:
            cluster = tomllib.load(f)
        base = path.parent
        entry = next((n for n in cluster.get("nodes", []) if n.get("id") == node), None)
        if entry is None:
            raise ValueError(f"{path}: no node {node}")
        if "grpc" not in entry:
            raise ValueError(f"{path}: node {node} serves no gRPC API (no `grpc` address)")
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
        )

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def wait_ready(self, within: float = 30.0) -> Status:
        """Wait until the node answers (for a cluster that is still starting)."""
        deadline = time.monotonic() + within
        while True:
            try:
                return self.status()
            except grpc.RpcError as error:
                if error.code() != grpc.StatusCode.UNAVAILABLE or time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def status(self) -> Status:
        reply = self._stub.Status(
            augur_pb2.StatusRequest(), timeout=self.timeout, metadata=self._metadata
        )
        return Status(reply.node, reply.cluster_id, reply.protocol, reply.fingerprint)

    def transact(
        self,
        reads: Iterable[Bytes] = (),
        writes: Optional[Mapping[Bytes, Optional[Bytes]]] = None,
    ) -> Committed:
        """Run one transaction in one call: read `reads`, then write `writes` (a value of None
        deletes the key), then commit. Raises `Aborted` if it aborted."""
        request = augur_pb2.TransactRequest(
            reads=[_bytes(k) for k in reads],
            writes=[
                augur_pb2.Write(key=_bytes(k), value=None if v is None else _bytes(v))
                for k, v in (writes or {}).items()
            ],
        )
        reply = self._stub.Transact(request, timeout=self.timeout, metadata=self._metadata)
        if reply.WhichOneof("outcome") == "aborted":
            raise Aborted._from(reply.aborted)
        return Committed(
            reply.committed.commit_ts,
            {kv.key: (kv.value if kv.HasField("value") else None) for kv in reply.reads},
        )

    def session(self) -> "Session":
        """An interactive session (one transaction at a time)."""
        return Session(self)

    def run(self, body: Callable[["Transaction"], T], attempts: int = 10) -> T:
        """Run `body` in a transaction of its own session and commit it, again while it aborts
        for a reason that may pass (at most `attempts` times). Returns what `body` returned."""
        with self.session() as session:
            return session.run(body, attempts)


class Session:
    """An interactive session: one gRPC stream, each request answered in order."""

    _END = object()

    def __init__(self, client: Client):
        self._requests: "queue.Queue[object]" = queue.Queue()
        self._replies = client._stub.Session(self._pending(), metadata=client._metadata)
        self._open: Optional[Transaction] = None

    def _pending(self):
        while True:
            request = self._requests.get()
            if request is Session._END:
                return
            yield request

    def _ask(self, **op) -> "augur_pb2.SessionReply":
        self._requests.put(augur_pb2.SessionRequest(**op))
        return next(self._replies)

    def begin(self, read_only: bool = False) -> "Transaction":
        reply = self._ask(begin=augur_pb2.Begin(read_only=read_only))
        if reply.WhichOneof("reply") == "aborted":
            raise Aborted._from(reply.aborted)
        self._open = Transaction(self, reply.begun.snapshot)
        return self._open

    def run(self, body: Callable[["Transaction"], T], attempts: int = 10) -> T:
        """Run `body` in a transaction and commit it, again while it aborts for a reason that
        may pass (at most `attempts` times). Returns what `body` returned."""
        for attempt in range(attempts):
            txn = self.begin()
            try:
                result = body(txn)
                txn.commit()
                return result
            except Aborted as aborted:
                if not aborted.retryable or attempt + 1 == attempts:
                    raise
            finally:
                if not txn.done:
                    txn.abort()
        raise AssertionError("unreachable")

    def close(self) -> None:
        """End the session (an open transaction is rolled back by the node)."""
        self._requests.put(Session._END)
        self._replies.cancel()

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class Transaction:
    """One transaction of a session. Writes are buffered until `commit`."""

    def __init__(self, session: Session, snapshot: int):
        self._session = session
        self.snapshot = snapshot
        self.done = False

    def _check_open(self) -> None:
        if self.done:
            raise RuntimeError("this transaction has ended")

    def _ended_by(self, reply: "augur_pb2.SessionReply") -> None:
        if reply.WhichOneof("reply") == "aborted":
            self.done = True
            raise Aborted._from(reply.aborted)

    def get(self, key: Bytes) -> Optional[bytes]:
        """The value of `key` (None if it holds none)."""
        self._check_open()
        reply = self._session._ask(get=augur_pb2.Get(key=_bytes(key)))
        self._ended_by(reply)
        return reply.value.value if reply.value.HasField("value") else None

    def put(self, key: Bytes, value: Bytes) -> None:
        self._check_open()
        self._session._ask(put=augur_pb2.Put(key=_bytes(key), value=_bytes(value)))

    def delete(self, key: Bytes) -> None:
        self._check_open()
        self._session._ask(delete=augur_pb2.Delete(key=_bytes(key)))

    def commit(self) -> int:
        """Commit; returns the commit timestamp, or raises `Aborted`."""
        self._check_open()
        reply = self._session._ask(commit=augur_pb2.Commit())
        self._ended_by(reply)
        self.done = True
        return reply.committed.commit_ts

    def abort(self) -> None:
        """Roll the transaction back."""
        self._check_open()
        self.done = True
        self._session._ask(abort=augur_pb2.Abort())
