"""A client of a whole cluster (`Cluster`): one `Client` per node, used one at a time, that moves
to another node when its own cannot be reached, as `augur get/put/txn` do
(docs/architecture/availability.md, *Clients*)."""

from __future__ import annotations

import pathlib
import time
import tomllib
from typing import Callable, Iterable, Mapping, Optional, Sequence, TypeVar, Union

from augur_client._client import DEFAULT_TIMEOUT, Client, Committed, Status, Transaction
from augur_client._errors import DeadlineExceeded, RequestError, Unavailable
from augur_client._retry import DEFAULT_ATTEMPTS, Backoff, retrying
from augur_client._values import Data

T = TypeVar("T")

#: How long a `Cluster` keeps looking for a node that answers, in seconds, by default: a dead
#: master's partitions are served again within about two seconds (the lease, then a Raft
#: commit), so this leaves room for a node that restarts too.
DEFAULT_PATIENCE = 10.0

#: The pause after every node of the cluster failed once, before they are tried again.
_ROUND_PAUSE = 0.2


def _moves_on(error: RequestError) -> bool:
    """Whether a request that failed with `error` may be made at another node: its node could
    not be reached or did not answer, and nothing was committed that another attempt would
    write twice (a commit whose outcome is unknown is never made again)."""
    return isinstance(error, (Unavailable, DeadlineExceeded)) and not error.outcome_unknown


class Cluster:
    """Clients of every node of a cluster, one used at a time (the *current* node, the first
    given unless told otherwise). A request its node cannot answer — the node is down, or does
    not answer within the request's timeout — is made again at the next node, round the
    cluster, for at most `patience` seconds; then the last error is raised. A commit whose
    outcome is unknown is never made again: its `RequestError` says so (`outcome_unknown`),
    and the keys must be read before the transaction is run again.

    Interactive transactions live on one node: `run` runs its body again, from the start, at
    another node when its node is lost before the commit; `begin` opens the transaction at a
    node that answers, and a transaction whose node is lost fails (its writes are not
    committed). Safe to share between threads as a `Client` is."""

    def __init__(
        self,
        clients: Sequence[Client],
        *,
        first: int = 0,
        patience: float = DEFAULT_PATIENCE,
        sleep: Callable[[float], object] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ):
        """`clients`: one per node, in the order they are tried; `first`: the index of the one
        used first."""
        if not clients:
            raise ValueError("a cluster has at least one node")
        if not 0 <= first < len(clients):
            raise ValueError(f"first must index one of the {len(clients)} clients, not {first}")
        if not patience >= 0:
            raise ValueError(f"patience is a time in seconds, at least 0, not {patience}")
        self.clients = list(clients)
        self.patience = float(patience)
        self._current = first
        self._sleep = sleep
        self._clock = clock

    @classmethod
    def from_cluster_file(
        cls,
        path: Union[str, pathlib.Path],
        node: int = 0,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        patience: float = DEFAULT_PATIENCE,
    ) -> "Cluster":
        """A client of every node of the cluster file at `path` that serves a gRPC API (see
        `Client.from_cluster_file`; each node's TLS name is its own), starting with `node`."""
        path = pathlib.Path(path)
        with open(path, "rb") as f:
            entries = tomllib.load(f).get("nodes", [])
        ids = [n["id"] for n in entries if isinstance(n.get("id"), int) and "grpc" in n]
        if node not in ids:
            raise ValueError(f"{path}: no node {node} serving gRPC (those that do: {sorted(ids)})")
        clients = [Client.from_cluster_file(path, i, timeout=timeout) for i in ids]
        return cls(clients, first=ids.index(node), patience=patience)

    @property
    def current(self) -> Client:
        """The client of the node requests go to now."""
        return self.clients[self._current]

    def close(self) -> None:
        """Close every node's connection."""
        for client in self.clients:
            client.close()

    def __enter__(self) -> "Cluster":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def on_some_node(self, request: Callable[[Client], T]) -> T:
        """`request(client)` at the current node, and at the next ones while it fails in a way
        another node may not (see the class); returns what it returned."""
        began = self._clock()
        tried = 0
        while True:
            at = self._current
            try:
                return request(self.clients[at])
            except RequestError as error:
                if not _moves_on(error) or self._clock() - began >= self.patience:
                    raise
            tried += 1
            # Another thread may have moved on already; move from where this one failed.
            self._current = (at + 1) % len(self.clients)
            if tried % len(self.clients) == 0:
                self._sleep(_ROUND_PAUSE)

    def status(self, *, timeout: Optional[float] = None) -> Status:
        """Which node answers now, and which cluster it belongs to."""
        return self.on_some_node(lambda client: client.status(timeout=timeout))

    def transact(
        self,
        reads: Iterable[Data] = (),
        writes: Optional[Mapping[Data, Optional[Data]]] = None,
        *,
        timeout: Optional[float] = None,
        trying_for: float = 0.0,
    ) -> Committed:
        """`Client.transact` at a node that answers."""
        reads = list(reads)
        return self.on_some_node(
            lambda client: client.transact(
                reads, writes, timeout=timeout, trying_for=trying_for
            )
        )

    def begin(
        self,
        read_only: bool = False,
        *,
        timeout: Optional[float] = None,
        trying_for: float = 0.0,
    ) -> Transaction:
        """`Client.begin` at a node that answers. The transaction stays on that node."""
        return self.on_some_node(
            lambda client: client.begin(read_only, timeout=timeout, trying_for=trying_for)
        )

    def run(
        self,
        body: Callable[[Transaction], T],
        *,
        attempts: int = DEFAULT_ATTEMPTS,
        backoff: Optional[Backoff] = None,
        read_only: bool = False,
        timeout: Optional[float] = None,
    ) -> T:
        """`Client.run` at a node that answers: `body` runs again after a retryable abort (at
        most `attempts` times), and at the next node when its node is lost before the commit
        (within `patience`)."""

        def attempt(trying_for: float) -> T:
            def at(client: Client) -> T:
                with client.begin(read_only, timeout=timeout, trying_for=trying_for) as txn:
                    return body(txn)

            return self.on_some_node(at)

        return retrying(attempt, attempts=attempts, backoff=backoff, sleep=self._sleep)
