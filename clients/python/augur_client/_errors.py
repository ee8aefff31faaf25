"""What the client raises: `Aborted` when a transaction aborts (an answer from the node), and a
`RequestError` subclass when a request got no answer. gRPC's own errors are translated here, so
an ordinary failure (a node that is down, paused or refuses the token) reads as what happened and
what to do, not as a gRPC traceback."""

from __future__ import annotations

from typing import Optional

import grpc

#: Abort reasons never retried, whatever the node says: running the same transaction again
#: cannot help (the client rolled it back; it read what a misspeculation undid, so it must be
#: compensated, not repeated; the request was malformed and would be again).
NEVER_RETRIED = frozenset({"user_rollback", "misspeculation", "invalid_request"})


class AugurError(Exception):
    """The base of every error this client raises about the cluster."""


class Aborted(AugurError):
    """The transaction aborted; nothing it wrote took effect.

    `reason` is a stable name (e.g. "write_write_conflict", as in `augur bench` results),
    `description` says what happened in words, and `retryable` whether running the same
    transaction again may succeed: the node's verdict, except that a rollback, a misspeculation
    or an invalid request is never retryable (`NEVER_RETRIED`)."""

    def __init__(self, reason: str, description: str, retryable: bool):
        super().__init__(f"the transaction aborted: {description} ({reason})")
        self.reason = reason
        self.description = description
        self.retryable = retryable and reason not in NEVER_RETRIED


class RequestError(AugurError):
    """A request got no answer from the node, or was refused. Attributes: `node` (which node,
    as "node 1 at host:port" or the address), `operation` (e.g. "get", "commit", "Transact"),
    `code` (the gRPC status code), `details` (the node's or gRPC's own words), `timeout` (how
    long the client waited, in seconds) and `outcome_unknown` (the request was a commit, and
    whether the transaction committed is not known). An error ends the session it happened in, rolling back
    its open transaction; the next `begin` opens a new one."""

    def __init__(
        self,
        message: str,
        *,
        node: str,
        operation: str,
        code: Optional[grpc.StatusCode] = None,
        details: str = "",
        timeout: Optional[float] = None,
        outcome_unknown: bool = False,
    ):
        super().__init__(message)
        self.node = node
        self.operation = operation
        self.code = code
        self.details = details
        self.timeout = timeout
        self.outcome_unknown = outcome_unknown


class Unavailable(RequestError):
    """The node could not be reached, or could not answer (it is down, restarting, or could not
    reach the nodes the request needed in time)."""


class DeadlineExceeded(RequestError):
    """No answer came within the request's timeout: the node may be paused, overloaded or cut
    off. `timeout` says how long the client waited, in seconds."""


class Unauthenticated(RequestError):
    """The node refused the client token (missing, or not the cluster's)."""


class InvalidRequest(RequestError):
    """The node refused the request as malformed or out of order (a key or value over its
    limits, a `get` with no transaction open): sending it again would fail again."""


class Overloaded(RequestError):
    """The node serves as many clients as it allows (`limits.max_clients`)."""


_UNKNOWN_OUTCOME = (
    " Whether the transaction committed is unknown: read its keys before running it again."
)


def _unavailable_advice(details: str) -> str:
    lowered = details.lower()
    if any(word in lowered for word in ("ssl", "tls", "handshake", "certificate", "peer name")):
        return (
            " The TLS handshake failed: use the cluster's CA (security.ca in the cluster file) "
            "as root_certificates and the node's name (node-ID.augur) as server_name; "
            "Client.from_cluster_file does both."
        )
    return (
        " Check that the node is running and that this is its gRPC address (`grpc` in its "
        "cluster file entry); try again, or use another node."
    )


def _never_connected(details: str) -> bool:
    """Whether an UNAVAILABLE status says gRPC found no connection to the node to send the call
    on (its words when no address could be connected to), rather than losing one mid-call."""
    return "failed to connect to all addresses" in details.lower()


def request_error(
    code: Optional[grpc.StatusCode],
    details: str,
    *,
    node: str,
    operation: str,
    timeout: Optional[float] = None,
    outcome_unknown: bool = False,
) -> RequestError:
    """The client's exception for a request `operation` to `node` that failed with gRPC status
    `code` and `details` (`timeout`: how long the client waited). A failed commit has an
    unknown outcome, unless the node refused it as a request."""
    details = (details or "").strip()
    if code == grpc.StatusCode.UNAVAILABLE and _never_connected(details):
        # gRPC fails a call this way before sending anything: nothing reached the node.
        outcome_unknown = False
    said = f": {details}" if details else ""
    what = f"{operation} to {node}"
    cls: type[RequestError]
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        cls = DeadlineExceeded
        waited = f"within {timeout:g} s" if timeout is not None else "in time"
        message = (
            f"no answer to {what} {waited}: the node may be paused, overloaded or cut off. "
            f"Pass a longer timeout (timeout=) if it is only slow, or use another node."
        )
    elif code == grpc.StatusCode.UNAVAILABLE:
        cls = Unavailable
        message = f"{node} is unavailable for {operation}{said}." + _unavailable_advice(details)
    elif code == grpc.StatusCode.UNAUTHENTICATED:
        cls = Unauthenticated
        outcome_unknown = False
        message = (
            f"{node} refused {operation}{said}. Pass the cluster's client token (token=, the "
            f"contents of security.client_token_file; Client.from_cluster_file reads it)."
        )
    elif code in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.FAILED_PRECONDITION):
        cls = InvalidRequest
        outcome_unknown = False
        message = f"{node} refused {operation} as invalid{said}. Sending it again would fail again."
    elif code == grpc.StatusCode.RESOURCE_EXHAUSTED:
        cls = Overloaded
        outcome_unknown = False
        message = (
            f"{node} refused {operation}{said}. Close the sessions and clients you no longer "
            f"use, try again later, or use another node."
        )
    elif code == grpc.StatusCode.CANCELLED:
        cls = RequestError
        message = f"{operation} to {node} was cancelled (its session or client was closed)."
    elif code == grpc.StatusCode.UNIMPLEMENTED:
        cls = RequestError
        outcome_unknown = False
        message = (
            f"{node} does not serve {operation}{said}: is this the gRPC address of an augur "
            f"node of a matching version?"
        )
    else:
        cls = RequestError
        name = code.name if code is not None else "no status"
        message = (
            f"{operation} to {node} failed ({name}){said}. This is not an ordinary failure: "
            f"please report it with the node's log."
        )
    if outcome_unknown:
        message += _UNKNOWN_OUTCOME
    return cls(
        message,
        node=node,
        operation=operation,
        code=code,
        details=details,
        timeout=timeout,
        outcome_unknown=outcome_unknown,
    )


def from_rpc_error(
    error: grpc.RpcError,
    *,
    node: str,
    operation: str,
    timeout: Optional[float] = None,
    outcome_unknown: bool = False,
) -> RequestError:
    """`request_error` for an error gRPC raised (a `grpc.Call` as well as an `RpcError`)."""
    code = error.code() if hasattr(error, "code") else None
    details = error.details() if hasattr(error, "details") else str(error)
    return request_error(
        code,
        details or "",
        node=node,
        operation=operation,
        timeout=timeout,
        outcome_unknown=outcome_unknown,
    )
