"""The client against a real augur node: run when AUGUR_TEST_CLUSTER names its cluster file
(crates/augur-grpc/tests/api.rs starts a clocksi-rep node with a client token and sets it);
skipped otherwise. Every test uses keys of its own, so the node may hold anything else."""

import os
import pathlib
import tomllib
import unittest
import uuid

import support  # noqa: F401 - the package from this source tree

from augur_client import (
    Aborted,
    Backoff,
    Client,
    InvalidRequest,
    Unauthenticated,
)

CLUSTER = os.environ.get("AUGUR_TEST_CLUSTER")


@unittest.skipUnless(CLUSTER, "AUGUR_TEST_CLUSTER does not name a cluster file")
class Live(unittest.TestCase):
    def setUp(self):
        self.client = Client.from_cluster_file(CLUSTER, node=0, timeout=10.0)
        self.addCleanup(self.client.close)
        self.client.wait_ready(within=30.0)
        # Keys of this test alone (a key's first four bytes are its shard tag).
        self.prefix = f"t{uuid.uuid4().hex[:8]}:"

    def key(self, name):
        return self.prefix + name

    def read(self, *names):
        reads = self.client.transact(reads=[self.key(n) for n in names]).reads
        return [reads[self.key(n).encode()] for n in names]

    def test_status_names_the_node(self):
        status = self.client.status(timeout=5.0)
        self.assertEqual(status.node, 0)
        self.assertTrue(status.protocol)
        self.assertTrue(status.fingerprint)

    def test_one_shot_writes_reads_and_deletes(self):
        a, b = self.key("a"), self.key("b")
        committed = self.client.transact(writes={a: "70", b: b"30"})
        self.assertGreater(committed.commit_ts, 0)
        self.assertEqual(self.read("a", "b", "c"), [b"70", b"30", None])
        self.client.transact(writes={a: None})
        self.assertEqual(self.read("a", "b"), [None, b"30"])

    def test_a_transaction_block_commits_or_rolls_back(self):
        with self.client.begin() as txn:
            self.assertIsNone(txn.get(self.key("x")))
            txn.put(self.key("x"), "1")
        self.assertEqual(self.read("x"), [b"1"])
        with self.assertRaisesRegex(RuntimeError, "changed my mind"):
            with self.client.begin() as txn:
                txn.put(self.key("x"), "2")
                raise RuntimeError("changed my mind")
        self.assertEqual(txn.state, "rolled back")
        self.assertEqual(self.read("x"), [b"1"])

    def test_a_conflict_aborts_with_a_retryable_reason(self):
        x = self.key("x")
        self.client.transact(writes={x: "1"})
        with self.client.session() as alice, self.client.session() as bob:
            first, second = alice.begin(), bob.begin()
            for txn in (first, second):
                self.assertEqual(txn.get(x), b"1")
            first.put(x, "2")
            second.put(x, "3")
            first.commit()
            with self.assertRaises(Aborted) as caught:
                second.commit()
            self.assertTrue(caught.exception.retryable, caught.exception)
            self.assertEqual(second.state, "aborted")
        self.assertEqual(self.read("x"), [b"2"])

    def test_run_retries_a_conflict_until_it_commits(self):
        x = self.key("x")
        self.client.transact(writes={x: "10"})
        attempts = []

        def increment(txn):
            value = int(txn.get(x))
            attempts.append(value)
            if len(attempts) == 1:
                # Another client commits between this attempt's read and its commit.
                self.client.transact(writes={x: "20"})
            txn.put(x, str(value + 1))
            return len(attempts)

        made = self.client.run(increment, backoff=Backoff(base=0.001, cap=0.05))
        self.assertEqual(made, 2)
        self.assertEqual(attempts, [10, 20])
        self.assertEqual(self.read("x"), [b"21"])

    def test_an_oversized_key_is_an_invalid_request(self):
        with self.assertRaises(InvalidRequest) as caught:
            self.client.transact(reads=["k" * 2000])
        self.assertIn("exceeds the limit", str(caught.exception))
        with self.client.session() as session:
            with self.assertRaises(InvalidRequest):
                with session.begin() as txn:
                    txn.get("k" * 2000)
            # The failed request ended that transaction, not the session.
            with session.begin(read_only=True) as txn:
                self.assertIsNone(txn.get(self.key("nothing")))

    def test_a_value_that_is_not_bytes_or_str_is_refused(self):
        with self.assertRaisesRegex(TypeError, "not int"):
            self.client.transact(writes={self.key("n"): 5})
        with self.assertRaisesRegex(TypeError, "not int"):
            with self.client.begin() as txn:
                txn.put(self.key("n"), 5)
        self.assertEqual(self.read("n"), [None])

    def test_the_token_is_checked(self):
        cluster = tomllib.loads(pathlib.Path(CLUSTER).read_text())
        if "client_token_file" not in cluster.get("security", {}):
            self.skipTest("the cluster has no client token")
        with Client(self.client.target, token="guess") as wrong:
            with self.assertRaisesRegex(Unauthenticated, "wrong client token"):
                wrong.status()
        with Client(self.client.target) as none:
            with self.assertRaisesRegex(Unauthenticated, "requires a client token"):
                with none.begin():
                    pass


if __name__ == "__main__":
    unittest.main()
