"""What the tests share: the package from this source tree (not an installed copy, which may be
older), and a fake node: a gRPC server of the augur API, scripted by the test, to observe what
the client sends and to make it fail, block or abort on cue.

    python3 tests/support.py --serve     # a fake node in a process of its own; prints its port
"""

from __future__ import annotations

import os
import pathlib
import sys
import threading
from concurrent import futures
from typing import Optional

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
# gRPC's own log lines (a connection closed by a stopped server) are noise in the tests' output.
os.environ.setdefault("GRPC_VERBOSITY", "ERROR")

import grpc  # noqa: E402

from augur_client import augur_pb2, augur_pb2_grpc  # noqa: E402


class FakeNode(augur_pb2_grpc.AugurServicer):
    """A node that answers every request at once, as its script says:

    - `store`: the committed values; a session's writes apply at commit;
    - `commit_aborts`: abort reasons the next commits answer with, in order (then they commit);
    - `fail`: operation name ("get", "commit", "Status", "Transact", ...) -> (code, details):
      the request fails with that gRPC status;
    - `block`: operation names whose request is never answered until `release` is set;
    - `token`: if set, every call must carry it.

    `ops` records the session operations received, in order; `trying_for_us` the
    `trying_for_us` of each begin and Transact request."""

    RETRYABLE = {"write_write_conflict", "wait_die", "validation_failed", "lock_timeout"}

    def __init__(self) -> None:
        self.store: dict[bytes, bytes] = {}
        self.commit_aborts: list[str] = []
        self.fail: dict[str, tuple[grpc.StatusCode, str]] = {}
        self.block: set[str] = set()
        self.release = threading.Event()
        self.token: Optional[str] = None
        self.ops: list[str] = []
        self.trying_for_us: list[int] = []
        self.commits = 0
        self._lock = threading.Lock()

    def _check(self, operation: str, context: grpc.ServicerContext) -> None:
        if self.token is not None:
            given = dict(context.invocation_metadata()).get("authorization")
            if given is None:
                context.abort(grpc.StatusCode.UNAUTHENTICATED, "this cluster requires a client token")
            if given != f"Bearer {self.token}":
                context.abort(grpc.StatusCode.UNAUTHENTICATED, "wrong client token")
        if operation in self.block:
            self.release.wait()
        if operation in self.fail:
            context.abort(*self.fail[operation])

    @staticmethod
    def aborted(reason: str) -> augur_pb2.Aborted:
        return augur_pb2.Aborted(
            reason=reason,
            description=f"(fake) {reason}",
            retryable=reason in FakeNode.RETRYABLE,
        )

    def Status(self, request, context):  # noqa: N802 - the generated servicer's name
        self._check("Status", context)
        return augur_pb2.StatusReply(node=7, cluster_id="fake", protocol="fake", fingerprint="f")

    def Transact(self, request, context):  # noqa: N802
        self._check("Transact", context)
        self.trying_for_us.append(request.trying_for_us)
        with self._lock:
            reads = [
                augur_pb2.KeyValue(key=k, value=self.store.get(k)) for k in request.reads
            ]
            if self.commit_aborts:
                reply = augur_pb2.TransactReply(aborted=self.aborted(self.commit_aborts.pop(0)))
            else:
                for write in request.writes:
                    if write.HasField("value"):
                        self.store[write.key] = write.value
                    else:
                        self.store.pop(write.key, None)
                self.commits += 1
                reply = augur_pb2.TransactReply(committed=augur_pb2.Committed(commit_ts=self.commits))
            reply.reads.extend(reads)
            return reply

    def Session(self, request_iterator, context):  # noqa: N802
        self._check("Session", context)
        writes: Optional[dict[bytes, Optional[bytes]]] = None
        for request in request_iterator:
            op = request.WhichOneof("op")
            self.ops.append(op)
            self._check(op, context)
            if op == "begin":
                self.trying_for_us.append(request.begin.trying_for_us)
                writes = {}
                yield augur_pb2.SessionReply(begun=augur_pb2.Begun(snapshot=self.commits))
            elif op == "get":
                key = request.get.key
                value = writes.get(key, self.store.get(key)) if writes is not None else None
                yield augur_pb2.SessionReply(value=augur_pb2.KeyValue(key=key, value=value))
            elif op in ("put", "delete"):
                assert writes is not None
                if op == "put":
                    writes[request.put.key] = request.put.value
                else:
                    writes[request.delete.key] = None
                yield augur_pb2.SessionReply(written=augur_pb2.Written())
            elif op == "commit":
                with self._lock:
                    if self.commit_aborts:
                        reason = self.commit_aborts.pop(0)
                        yield augur_pb2.SessionReply(aborted=self.aborted(reason))
                        continue
                    for key, value in (writes or {}).items():
                        if value is None:
                            self.store.pop(key, None)
                        else:
                            self.store[key] = value
                    self.commits += 1
                    ts = self.commits
                yield augur_pb2.SessionReply(committed=augur_pb2.Committed(commit_ts=ts))
            elif op == "abort":
                writes = None
                yield augur_pb2.SessionReply(aborted=self.aborted("user_rollback"))


class Served:
    """A `FakeNode` served on a free port of 127.0.0.1 (`target`), until `stop`."""

    def __init__(self, node: Optional[FakeNode] = None):
        self.node = node or FakeNode()
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
        augur_pb2_grpc.add_AugurServicer_to_server(self.node, self._server)
        port = self._server.add_insecure_port("127.0.0.1:0")
        self.target = f"127.0.0.1:{port}"
        self._server.start()

    def stop(self) -> None:
        self.node.release.set()
        self._server.stop(grace=None)


if __name__ == "__main__" and sys.argv[1:] == ["--serve"]:
    served = Served()
    print(served.target.rsplit(":", 1)[1], flush=True)
    served._server.wait_for_termination()
