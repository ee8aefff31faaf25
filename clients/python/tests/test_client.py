"""The client against fake nodes (tests/support.py): deadlines (a node that never answers, one
paused mid-transaction, one stopped with SIGSTOP), transactions as context managers, retries,
and gRPC failures raised as the client's exceptions."""

import os
import signal
import socket
import subprocess
import sys
import time
import unittest

import grpc

import support

from augur_client import (
    Aborted,
    Backoff,
    Client,
    DeadlineExceeded,
    InvalidRequest,
    Overloaded,
    Unauthenticated,
    Unavailable,
)

#: Generous: the machine may be busy; a deadline test only fails when a call hangs for good.
SLACK = 10.0


class WithFakeNode(unittest.TestCase):
    def setUp(self):
        self.served = support.Served()
        self.node = self.served.node
        self.client = Client(self.served.target, timeout=5.0, node=7)

    def tearDown(self):
        self.client.close()
        self.served.stop()


class Deadlines(WithFakeNode):
    def test_a_get_the_node_never_answers_raises_deadline_exceeded(self):
        self.node.block = {"get"}
        txn = self.client.begin()
        started = time.monotonic()
        with self.assertRaises(DeadlineExceeded) as caught:
            txn.get("acct:alice", timeout=0.3)
        self.assertLess(time.monotonic() - started, SLACK)
        e = caught.exception
        self.assertEqual((e.operation, e.timeout), ("get", 0.3))
        self.assertIn(f"no answer to get to node 7 at {self.served.target} within 0.3 s", str(e))
        self.assertTrue(txn.done)
        self.assertEqual(txn.state, "failed")
        with self.assertRaisesRegex(RuntimeError, "has ended"):
            txn.get("acct:alice")

    def test_a_timeout_given_to_begin_bounds_the_transactions_requests(self):
        self.node.block = {"get"}
        with self.assertRaises(DeadlineExceeded) as caught:
            with self.client.begin(timeout=0.3) as txn:
                txn.get("k")
        self.assertEqual(caught.exception.timeout, 0.3)
        self.assertEqual(txn.state, "failed")

    def test_the_client_timeout_applies_to_every_request(self):
        self.client.close()
        self.client = Client(self.served.target, timeout=0.3)
        for op, call in (
            ("Status", lambda c: c.status()),
            ("Transact", lambda c: c.transact(reads=["k"])),
            ("begin", lambda c: c.begin()),
        ):
            with self.subTest(op=op):
                self.node.block = {op}
                with self.assertRaises(DeadlineExceeded) as caught:
                    call(self.client)
                self.assertEqual(caught.exception.timeout, 0.3)
                self.assertFalse(caught.exception.outcome_unknown)

    def test_a_commit_without_answer_has_an_unknown_outcome(self):
        self.node.block = {"commit"}
        txn = self.client.begin()
        txn.put("k", "v")
        with self.assertRaises(DeadlineExceeded) as caught:
            txn.commit(timeout=0.3)
        self.assertTrue(caught.exception.outcome_unknown)
        self.assertIn("unknown", str(caught.exception))

    def test_a_one_shot_write_without_answer_has_an_unknown_outcome(self):
        self.node.block = {"Transact"}
        with self.assertRaises(DeadlineExceeded) as caught:
            self.client.transact(writes={"k": "v"}, timeout=0.3)
        self.assertTrue(caught.exception.outcome_unknown)

    def test_the_session_goes_on_after_a_deadline_with_a_new_stream(self):
        session = self.client.session()
        self.node.block = {"get"}
        txn = session.begin()
        with self.assertRaises(DeadlineExceeded):
            txn.get("k", timeout=0.2)
        self.node.block = set()
        self.node.release.set()
        txn = session.begin()
        txn.put("k", "v")
        txn.commit()
        self.assertEqual(self.node.store, {b"k": b"v"})
        session.close()

    def test_timeouts_are_checked(self):
        for bad in (0, -1, float("inf"), float("nan")):
            with self.subTest(timeout=bad), self.assertRaises(ValueError):
                Client(self.served.target, timeout=bad)
        with self.assertRaises(TypeError):
            self.client.status(timeout="5")


class NoNode(unittest.TestCase):
    def test_a_node_that_accepts_but_never_speaks(self):
        # What a paused node looks like from outside: the kernel accepts the connection, and
        # nothing answers on it.
        with socket.socket() as listener:
            listener.bind(("127.0.0.1", 0))
            listener.listen(8)
            target = "127.0.0.1:%d" % listener.getsockname()[1]
            with Client(target, timeout=0.3) as client:
                started = time.monotonic()
                with self.assertRaises(DeadlineExceeded):
                    client.status()
                with self.assertRaises(DeadlineExceeded):
                    client.begin()
                self.assertLess(time.monotonic() - started, SLACK)

    def test_nothing_listening_is_unavailable_and_says_what_to_check(self):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        with Client(f"127.0.0.1:{port}", timeout=5.0, node=3) as client:
            with self.assertRaises(Unavailable) as caught:
                client.status()
            self.assertIn(f"node 3 at 127.0.0.1:{port} is unavailable for Status", str(caught.exception))
            self.assertIn("Check that the node is running", str(caught.exception))
            with self.assertRaises(Unavailable):
                with client.begin():
                    pass
            with self.assertRaises(Unavailable):
                client.wait_ready(within=0.5)


@unittest.skipUnless(hasattr(signal, "SIGSTOP"), "needs SIGSTOP")
class Stopped(unittest.TestCase):
    """A node process stopped with SIGSTOP in the middle of a transaction (as `augur nemesis`
    pauses nodes): the client's next request raises DeadlineExceeded, not hang."""

    def setUp(self):
        self.process = subprocess.Popen(
            [sys.executable, support.__file__, "--serve"], stdout=subprocess.PIPE, text=True
        )
        self.addCleanup(self.stop_process)
        self.target = "127.0.0.1:" + self.process.stdout.readline().strip()

    def stop_process(self):
        os.kill(self.process.pid, signal.SIGCONT)
        self.process.kill()
        self.process.wait()
        self.process.stdout.close()

    def test_a_stopped_node_raises_deadline_exceeded(self):
        with Client(self.target, timeout=10.0) as client:
            client.wait_ready(within=SLACK)
            txn = client.begin()
            txn.put("acct:alice", "70")
            os.kill(self.process.pid, signal.SIGSTOP)
            started = time.monotonic()
            with self.assertRaises(DeadlineExceeded):
                txn.get("acct:alice", timeout=0.5)
            with self.assertRaises(DeadlineExceeded):
                client.status(timeout=0.5)
            self.assertLess(time.monotonic() - started, SLACK)
            os.kill(self.process.pid, signal.SIGCONT)
            # Resumed, the node answers again; the failed transaction is gone.
            self.assertEqual(client.status().cluster_id, "fake")
            with client.begin() as txn:
                self.assertIsNone(txn.get("acct:alice"))


class ContextManager(WithFakeNode):
    def test_commits_at_the_end_of_the_block(self):
        with self.client.begin() as txn:
            txn.put("a", "1")
            txn.put(b"b", b"2")
            txn.delete("c")
        self.assertEqual(txn.state, "committed")
        self.assertEqual(self.node.store, {b"a": b"1", b"b": b"2"})
        self.assertEqual(self.node.ops, ["begin", "put", "put", "delete", "commit"])

    def test_rolls_back_when_the_block_raises(self):
        with self.assertRaisesRegex(KeyError, "oops"):
            with self.client.begin() as txn:
                txn.put("a", "1")
                raise KeyError("oops")
        self.assertEqual(txn.state, "rolled back")
        self.assertEqual(self.node.store, {})
        self.assertEqual(self.node.ops, ["begin", "put", "abort"])

    def test_a_bad_value_is_refused_before_it_is_sent_and_rolls_back(self):
        with self.assertRaisesRegex(TypeError, "not int"):
            with self.client.begin() as txn:
                txn.put("k", 5)
        self.assertEqual(self.node.ops, ["begin", "abort"])
        self.assertEqual(self.node.store, {})
        with self.assertRaisesRegex(TypeError, "not int"):
            self.client.transact(writes={"k": 5})
        self.assertEqual(self.node.store, {})

    def test_an_abort_at_commit_is_raised(self):
        self.node.commit_aborts = ["write_write_conflict"]
        with self.assertRaises(Aborted) as caught:
            with self.client.begin() as txn:
                txn.put("a", "1")
        self.assertEqual(caught.exception.reason, "write_write_conflict")
        self.assertTrue(caught.exception.retryable)
        self.assertEqual(txn.state, "aborted")

    def test_an_abort_the_block_swallowed_is_raised_at_its_end(self):
        session = self.client.session()
        self.node.commit_aborts = ["wait_die"]
        with self.assertRaises(Aborted):
            with session.begin() as txn:
                try:
                    txn.commit()
                except Aborted:
                    pass  # and goes on as if it had committed
        session.close()

    def test_a_rollback_in_the_block_is_kept(self):
        with self.client.begin() as txn:
            txn.put("a", "1")
            txn.rollback()
        self.assertEqual(txn.state, "rolled back")
        self.assertEqual(self.node.ops, ["begin", "put", "abort"])
        self.assertEqual(self.node.store, {})

    def test_closing_the_session_ends_its_transaction(self):
        session = self.client.session()
        txn = session.begin()
        session.close()
        self.assertEqual(txn.state, "rolled back")
        with self.assertRaisesRegex(RuntimeError, "has ended"):
            txn.put("k", "v")
        txn.rollback()  # nothing to do
        self.assertEqual(self.node.ops, ["begin"])

    def test_one_transaction_at_a_time_in_a_session(self):
        with self.client.session() as session:
            session.begin()
            with self.assertRaisesRegex(RuntimeError, "already open"):
                session.begin()


class Retries(WithFakeNode):
    def test_run_retries_retryable_aborts_and_returns_the_result(self):
        self.node.commit_aborts = ["write_write_conflict", "wait_die"]
        attempts = []

        def body(txn):
            attempts.append(txn.snapshot)
            txn.put("k", str(len(attempts)))
            return len(attempts)

        self.assertEqual(self.client.run(body, backoff=Backoff(base=0.001, cap=0.01)), 3)
        self.assertEqual(self.node.store, {b"k": b"3"})

    def test_each_retry_says_how_long_the_transaction_has_been_trying(self):
        self.node.commit_aborts = ["wait_die", "wait_die"]
        self.client.run(lambda txn: txn.put("k", "v"), backoff=Backoff(base=0.02, cap=0.02))
        first, *retries = self.node.trying_for_us
        self.assertEqual(first, 0)
        self.assertEqual(len(retries), 2)
        self.assertTrue(0 < retries[0] < retries[1], self.node.trying_for_us)

    def test_retrying_a_one_shot_call_passes_the_time_on(self):
        from augur_client import retrying

        self.node.commit_aborts = ["wait_die"]
        retrying(lambda trying_for: self.client.transact(writes={"k": "v"}, trying_for=trying_for),
                 backoff=Backoff(base=0.01, cap=0.01))
        self.assertEqual(len(self.node.trying_for_us), 2)
        self.assertEqual(self.node.trying_for_us[0], 0)
        self.assertGreater(self.node.trying_for_us[1], 0)

    def test_run_gives_up_after_its_attempts(self):
        self.node.commit_aborts = ["lock_timeout"] * 5
        with self.assertRaises(Aborted) as caught:
            self.client.run(lambda txn: txn.put("k", "v"), attempts=3,
                            backoff=Backoff(base=0, cap=0))
        self.assertEqual(caught.exception.reason, "lock_timeout")
        self.assertEqual(self.node.ops.count("commit"), 3)
        self.assertEqual(self.node.commit_aborts, ["lock_timeout"] * 2)

    def test_run_never_retries_what_cannot_pass(self):
        for reason in ("misspeculation", "invalid_request"):
            with self.subTest(reason=reason):
                self.node.ops.clear()
                self.node.commit_aborts = [reason]
                with self.assertRaises(Aborted):
                    self.client.run(lambda txn: txn.put("k", "v"))
                self.assertEqual(self.node.ops.count("commit"), 1)

    def test_run_rolls_back_on_the_bodys_error_and_does_not_retry(self):
        def body(txn):
            txn.put("k", "v")
            raise ValueError("no")

        with self.assertRaisesRegex(ValueError, "no"):
            self.client.run(body)
        self.assertEqual(self.node.ops, ["begin", "put", "abort"])

    def test_a_rollback_in_the_body_is_not_retried(self):
        def body(txn):
            txn.rollback()
            return "rolled back"

        self.assertEqual(self.client.run(body), "rolled back")
        self.assertEqual(self.node.ops, ["begin", "abort"])

    def test_a_failed_commit_is_not_retried(self):
        self.node.fail = {"commit": (grpc.StatusCode.UNAVAILABLE, "no reply within 10s")}
        with self.assertRaises(Unavailable) as caught:
            self.client.run(lambda txn: txn.put("k", "v"))
        self.assertTrue(caught.exception.outcome_unknown)
        self.assertEqual(self.node.ops.count("commit"), 1)


class Failures(WithFakeNode):
    def test_a_wrong_token_is_unauthenticated(self):
        self.node.token = "s3cret"
        with self.assertRaises(Unauthenticated) as caught:
            self.client.status()
        self.assertIn("requires a client token", str(caught.exception))
        with self.assertRaises(Unauthenticated):
            self.client.begin()
        with Client(self.served.target, token="guess") as wrong:
            with self.assertRaisesRegex(Unauthenticated, "wrong client token"):
                wrong.transact(reads=["k"])
        with Client(self.served.target, token="s3cret") as right:
            self.assertEqual(right.status().node, 7)

    def test_a_refused_request_ends_the_transaction_not_the_session(self):
        self.node.fail = {"get": (grpc.StatusCode.INVALID_ARGUMENT, "key exceeds the limit")}
        with self.client.session() as session:
            with self.assertRaises(InvalidRequest) as caught:
                with session.begin() as txn:
                    txn.get("k" * 2000)
            self.assertIn("key exceeds the limit", str(caught.exception))
            self.assertEqual(txn.state, "failed")
            del self.node.fail["get"]
            with session.begin() as txn:
                self.assertIsNone(txn.get("k"))

    def test_no_grpc_traceback(self):
        self.node.fail = {"Status": (grpc.StatusCode.RESOURCE_EXHAUSTED, "limits.max_clients")}
        with self.assertRaises(Exception) as caught:
            self.client.status()
        error = caught.exception
        self.assertIsInstance(error, Overloaded)
        self.assertNotIsInstance(error, grpc.RpcError)
        # Raised `from None`: a traceback shows the client's message, not gRPC's internals.
        self.assertIsNone(error.__cause__)
        self.assertTrue(error.__suppress_context__)


if __name__ == "__main__":
    unittest.main()
