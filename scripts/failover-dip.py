#!/usr/bin/env python3
"""Update throughput around the faults of `augur nemesis` runs.

Usage: scripts/failover-dip.py DIR [DIR...], each DIR a workload directory the nemesis wrote
(`history.jsonl` and `timeline.txt`), e.g. `nemesis-results/bank`.

Prints, per run, the longest stretch between the first fault and the heal in which no update
committed; with `kill-master` faults, also the committed update transactions per second in the
calm before the first fault and after the heal, and, for the 4.5 s after each kill in 250 ms
steps, the commit rate as a
fraction of that calm rate (the mean over every kill of every run), then the rate while the
killed master was down, until a transaction writing every partition committed elsewhere.
Times in both files count from the run's start (the history's from its recorder, made just
before the timeline: the two origins differ by well under a millisecond)."""

import json
import re
import sys

BIN = 0.25
BINS = 18


def commits_of(path):
    """Completion times (s) of the committed transactions that wrote something."""
    times = []
    with open(path) as history:
        next(history)  # the header
        for line in history:
            record = json.loads(line)
            if record["outcome"]["status"] == "committed" and not record.get("read_only"):
                times.append(record["complete_us"] / 1e6)
    return sorted(times)


def events_of(path):
    """(kills as [(killed at, every partition committing again at)], first fault at, healed
    at)."""
    kills, first, healed = [], None, None
    for line in open(path):
        match = re.match(r"\s*([\d.]+) s\s+(.*)", line)
        if not match:
            continue
        at, what = float(match.group(1)), match.group(2)
        if first is None and at > 0:
            first = at
        if what.startswith("kill -9") and "master" in what:
            kills.append([at, None])
        elif what.startswith("every partition committed again") and kills:
            kills[-1][1] = at
        elif what.startswith("healed"):
            healed = at
    return [(k, r) for k, r in kills if r is not None], first, healed


def main(dirs):
    calm, after_kill, down = [], [0.0] * BINS, []
    kill_count = 0
    for directory in dirs:
        commits = commits_of(f"{directory}/history.jsonl")
        kills, first, healed = events_of(f"{directory}/timeline.txt")
        if first is None or healed is None:
            sys.exit(f"{directory}: no fault, or no heal, in its timeline")
        during = [first] + [c for c in commits if first <= c <= healed] + [healed]
        gap = max(b - a for a, b in zip(during, during[1:]))
        print(f"{directory}: longest stretch without an update commit during the faults: "
              f"{gap:.2f} s")
        if not kills:
            continue

        def rate(start, end):
            if end <= start:
                return 0.0
            return sum(1 for c in commits if start <= c < end) / (end - start)

        # Half a second after the start and after the heal: clients connecting, probes.
        run_calm = (rate(0.5, kills[0][0]) + rate(healed + 0.5, commits[-1])) / 2
        calm.append(run_calm)
        for killed, resumed in kills:
            kill_count += 1
            for i in range(BINS):
                after_kill[i] += rate(killed + i * BIN, killed + (i + 1) * BIN) / run_calm
            down.append(rate(killed, resumed) / run_calm)
    if not kill_count:
        return
    print(f"calm update commits/s, per run: {', '.join(f'{c:.0f}' for c in calm)}")
    print(f"after a kill, per {BIN * 1000:.0f} ms, as a fraction of the calm rate "
          f"(mean of {kill_count} kills):")
    print("  " + " ".join(f"{b / kill_count:.2f}" for b in after_kill))
    print(f"while the killed master was down: {sum(down) / len(down):.2f} of the calm rate")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
