"""A client of a whole cluster against fake nodes (tests/support.py): requests move to the next
node when theirs cannot be reached, never after a commit whose outcome is unknown, and give up
after their patience."""

import pathlib
import tempfile
import unittest

import grpc

import support

from augur_client import Aborted, Client, Cluster, Unavailable


class TwoNodes(unittest.TestCase):
    def setUp(self):
        self.served = [support.Served(), support.Served()]
        self.clients = [
            Client(s.target, timeout=5.0, node=i) for i, s in enumerate(self.served)
        ]
        self.slept = []
        self.cluster = Cluster(self.clients, patience=5.0, sleep=self.slept.append)

    def tearDown(self):
        self.cluster.close()
        for s in self.served:
            s.stop()

    def test_a_one_shot_transaction_moves_to_the_next_node_when_its_own_is_down(self):
        self.served[0].stop()
        committed = self.cluster.transact(writes={"acct:alice": "100"})
        self.assertEqual(committed.commit_ts, 1)
        self.assertEqual(self.served[1].node.store, {b"acct:alice": b"100"})
        # Later requests go to the node that answered, first.
        self.assertIs(self.cluster.current, self.clients[1])
        self.cluster.transact(writes={"acct:bob": "0"})
        self.assertEqual(self.served[1].node.commits, 2)

    def test_a_commit_whose_outcome_is_unknown_is_not_made_again_elsewhere(self):
        self.served[0].node.fail = {"commit": (grpc.StatusCode.UNAVAILABLE, "connection reset")}

        def body(txn):
            txn.put("acct:alice", "1")

        with self.assertRaises(Unavailable) as caught:
            self.cluster.run(body)
        self.assertTrue(caught.exception.outcome_unknown)
        self.assertEqual(self.served[1].node.ops, [])
        self.assertIs(self.cluster.current, self.clients[0])

    def test_run_starts_the_body_again_at_the_next_node_when_a_read_finds_its_node_gone(self):
        self.served[0].node.fail = {"get": (grpc.StatusCode.UNAVAILABLE, "node stopped")}
        self.served[1].node.store = {b"acct:alice": b"70"}
        runs = []

        def body(txn):
            runs.append(self.cluster.current.name)
            balance = int(txn.get("acct:alice"))
            txn.put("acct:alice", str(balance + 1))
            return balance

        self.assertEqual(self.cluster.run(body), 70)
        self.assertEqual(len(runs), 2)
        self.assertEqual(self.served[1].node.store, {b"acct:alice": b"71"})
        self.assertEqual(self.served[0].node.commits, 0)

    def test_aborts_are_retried_where_they_happened(self):
        self.served[0].node.commit_aborts = ["write_write_conflict"]
        self.cluster.run(lambda txn: txn.put("k", "v"))
        self.assertEqual(self.served[0].node.commits, 1)
        self.assertEqual(self.served[1].node.ops, [])

    def test_an_abort_that_may_not_pass_is_not_moved_either(self):
        self.served[0].node.commit_aborts = ["misspeculation"]
        with self.assertRaises(Aborted):
            self.cluster.transact(writes={"k": "v"})
        self.assertEqual(self.served[1].node.commits, 0)

    def test_with_every_node_down_the_last_error_is_raised_after_the_patience(self):
        for s in self.served:
            s.stop()
        now = [0.0]

        def sleep(seconds):
            now[0] += seconds

        cluster = Cluster(self.clients, patience=1.0, sleep=sleep, clock=lambda: now[0])
        with self.assertRaises(Unavailable):
            cluster.status(timeout=1.0)
        # One pause after each round of both nodes, until the patience ran out.
        self.assertGreaterEqual(now[0], 1.0)
        self.assertLess(now[0], 1.5)


class ClusterFile(unittest.TestCase):
    def test_every_node_serving_grpc_gets_a_client_starting_with_the_one_asked_for(self):
        with tempfile.TemporaryDirectory() as d:
            path = pathlib.Path(d) / "cluster.toml"
            path.write_text(
                "[[nodes]]\nid = 0\naddr = \"127.0.0.1:7000\"\ngrpc = \"127.0.0.1:7100\"\n"
                "[[nodes]]\nid = 1\naddr = \"127.0.0.1:7001\"\ngrpc = \"127.0.0.1:7101\"\n"
                "[[nodes]]\nid = 2\naddr = \"127.0.0.1:7002\"\n"
            )
            with Cluster.from_cluster_file(path, node=1) as cluster:
                self.assertEqual(
                    [c.name for c in cluster.clients],
                    ["node 0 at 127.0.0.1:7100", "node 1 at 127.0.0.1:7101"],
                )
                self.assertIs(cluster.current, cluster.clients[1])
            with self.assertRaisesRegex(ValueError, r"no node 2 serving gRPC \(those that do: \[0, 1\]\)"):
                Cluster.from_cluster_file(path, node=2)

    def test_bad_arguments_are_refused(self):
        with self.assertRaisesRegex(ValueError, "at least one node"):
            Cluster([])
        client = Client("127.0.0.1:1")
        self.addCleanup(client.close)
        with self.assertRaisesRegex(ValueError, "first must index"):
            Cluster([client], first=1)
        with self.assertRaisesRegex(ValueError, "patience"):
            Cluster([client], patience=-1)


if __name__ == "__main__":
    unittest.main()
