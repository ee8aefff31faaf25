"""Move money between two accounts in one transaction, then read both back.

    pip install clients/python      # or: AUGUR_PYTHON="$(scripts/python-client.sh)"
    python3 clients/python/examples/transfer.py --cluster DIR/cluster.toml [--node 0] [--amount 30]

Opens both accounts (100 and 0) if they hold nothing yet, reads the total, moves `--amount` from
alice to bob in an interactive transaction (run again, after a randomized wait, while it aborts
for a reason that may pass), reads both balances back in a one-shot transaction, and exits 0 if
the total is still what it was. Exits 1 if alice holds less than the amount (nothing moves),
and 2 with the client's message if the cluster could not be used.
"""

import argparse
import sys

from augur_client import DEFAULT_TIMEOUT, AugurError, Backoff, Client, Transaction

ALICE, BOB = "acct:alice", "acct:bob"


class NotEnough(Exception):
    """Alice holds less than the amount: the transfer is rolled back."""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cluster", required=True, help="the cluster file")
    parser.add_argument("--node", type=int, default=0, help="the node to talk to")
    parser.add_argument("--amount", type=int, default=30)
    parser.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT,
        help="seconds each request may wait for its answer",
    )
    args = parser.parse_args()

    try:
        with Client.from_cluster_file(args.cluster, node=args.node, timeout=args.timeout) as client:
            return transfer(client, args.amount)
    except NotEnough as refused:
        print(refused, file=sys.stderr)
        return 1
    except (AugurError, OSError, ValueError) as error:  # the cluster, or its file
        print(f"error: {error}", file=sys.stderr)
        return 2


def transfer(client: Client, amount: int) -> int:
    status = client.wait_ready()
    print(f"connected to node {status.node} of {status.cluster_id} ({status.protocol})")

    def open_accounts(txn: Transaction) -> None:
        if txn.get(ALICE) is None and txn.get(BOB) is None:
            txn.put(ALICE, "100")
            txn.put(BOB, "0")

    client.run(open_accounts)

    # A transaction as a context manager: committed at the end of the block (rolled back if
    # the block raises).
    with client.begin(read_only=True) as txn:
        total = sum(int(txn.get(k) or 0) for k in (ALICE, BOB))

    def move(txn: Transaction) -> None:
        alice, bob = int(txn.get(ALICE) or 0), int(txn.get(BOB) or 0)
        if alice < amount:
            raise NotEnough(f"alice holds {alice}, less than {amount}")
        txn.put(ALICE, str(alice - amount))
        txn.put(BOB, str(bob + amount))

    client.run(move, attempts=10, backoff=Backoff(base=0.01, cap=0.5))

    after = client.transact(reads=[ALICE, BOB])
    balances = {k.decode(): int(v or 0) for k, v in after.reads.items()}
    print(f"transferred {amount}: {balances} (read at {after.commit_ts})")
    if sum(balances.values()) != total:
        print(f"the total changed: {total} before, {sum(balances.values())} after")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
