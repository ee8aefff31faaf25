"""A Python client for augur, over the gRPC API every node serves (proto/augur/v1/augur.proto).

    from augur_client import Client

    with Client.from_cluster_file("cluster.toml", node=0) as client:
        client.transact(writes={"acct:alice": "100", "acct:bob": "0"})   # one call

        with client.begin() as txn:           # commits at the end, rolls back on an exception
            balance = int(txn.get("acct:alice"))
            txn.put("acct:alice", str(balance - 30))

        def transfer(txn):                    # run again, after a randomized wait, while it
            ...                               # aborts for a reason that may pass
        client.run(transfer, attempts=10)

Keys and values are bytes; a str is taken as its UTF-8 bytes, and anything else is refused with
a TypeError. Every request waits at most the client's `timeout` (15 s unless given) or the
call's own `timeout=`. A transaction that aborts raises `Aborted`, which says why and whether
running it again may succeed (`retryable`); a request that got no answer raises a
`RequestError` subclass (`Unavailable`, `DeadlineExceeded`, `Unauthenticated`,
`InvalidRequest`, `Overloaded`) that says which node, what failed and what to do. Both are
`AugurError`s.
"""

from augur_client._client import (
    DEFAULT_TIMEOUT,
    Client,
    Committed,
    Session,
    Status,
    Transaction,
)
from augur_client._cluster import DEFAULT_PATIENCE, Cluster
from augur_client._errors import (
    NEVER_RETRIED,
    Aborted,
    AugurError,
    DeadlineExceeded,
    InvalidRequest,
    Overloaded,
    RequestError,
    Unauthenticated,
    Unavailable,
)
from augur_client._retry import DEFAULT_ATTEMPTS, Backoff, is_retryable, retrying
from augur_client._values import Data

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_ATTEMPTS",
    "DEFAULT_PATIENCE",
    "DEFAULT_TIMEOUT",
    "NEVER_RETRIED",
    "Aborted",
    "AugurError",
    "Backoff",
    "Client",
    "Cluster",
    "Committed",
    "Data",
    "DeadlineExceeded",
    "InvalidRequest",
    "Overloaded",
    "RequestError",
    "Session",
    "Status",
    "Transaction",
    "Unauthenticated",
    "Unavailable",
    "is_retryable",
    "retrying",
]
