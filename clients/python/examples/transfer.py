"""Move money between two accounts in one transaction, then read both back.

    python3 clients/python/examples/transfer.py --cluster DIR/cluster.toml [--node 0] [--amount 30]

Opens both accounts (100 and 0) if they hold nothing yet, moves `--amount` from alice to bob in
an interactive transaction (retried while it aborts for a reason that may pass), reads both
balances back in a one-shot read-only transaction, and exits 0 if the total is still what it
was before the transfer.
"""

import argparse
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

from augur_client import Client  # noqa: E402

ALICE, BOB = "acct:alice", "acct:bob"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cluster", required=True, help="the cluster file")
    parser.add_argument("--node", type=int, default=0, help="the node to talk to")
    parser.add_argument("--amount", type=int, default=30)
    args = parser.parse_args()

    with Client.from_cluster_file(args.cluster, node=args.node) as client:
        status = client.wait_ready()
        print(f"connected to node {status.node} of {status.cluster_id} ({status.protocol})")

        def open_accounts(txn):
            if txn.get(ALICE) is None and txn.get(BOB) is None:
                txn.put(ALICE, "100")
                txn.put(BOB, "0")

        client.run(open_accounts)
        before = client.transact(reads=[ALICE, BOB]).reads
        total = sum(int(before[k.encode()]) for k in (ALICE, BOB))

        def transfer(txn):
            alice, bob = int(txn.get(ALICE)), int(txn.get(BOB))
            if alice < args.amount:
                raise SystemExit(f"alice holds {alice}, less than {args.amount}")
            txn.put(ALICE, str(alice - args.amount))
            txn.put(BOB, str(bob + args.amount))

        client.run(transfer)
        after = client.transact(reads=[ALICE, BOB])
        balances = {k.decode(): int(v) for k, v in after.reads.items()}
        print(f"transferred {args.amount}: {balances} (read at {after.commit_ts})")
        if sum(balances.values()) != total:
            print(f"the total changed: {total} before, {sum(balances.values())} after")
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
