#!/usr/bin/env bash
# Make the cluster directory a compose file mounts, with the image's own `augur cluster init`:
#   deploy/compose/init.sh 3-nodes        # 3 nodes, lan, replication 3
#   deploy/compose/init.sh 3dc-9-nodes    # 9 nodes in 3 DCs, replication 3, delays by tc netem
# An existing directory is kept (remove it to start afresh: it holds the nodes' data).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
name="${1:-}"
case "$name" in
    3-nodes) nodes=3; subnet=172.28.3; latency=lan; emulate=true ;;
    3dc-9-nodes)
        nodes=9; subnet=172.28.9; latency=3dc; emulate=false
        # The delays need the kernel's netem and prio queueing disciplines (sch_netem,
        # sch_prio). Without them the nodes delay their messages themselves (the same
        # delays, added by augur's runtime instead of the network), and this says so.
        if ! docker run --rm --cap-add NET_ADMIN --network none --entrypoint /sbin/tc augur:latest \
                qdisc add dev lo root netem delay 1ms >/dev/null 2>&1; then
            echo "init.sh: this kernel has no netem: the nodes will emulate the inter-DC latency themselves" >&2
            emulate=true
        fi
        ;;
    *) echo "usage: deploy/compose/init.sh 3-nodes|3dc-9-nodes" >&2; exit 2 ;;
esac
if [ -e "$name/cluster.toml" ]; then
    echo "$name/cluster.toml exists: keeping it"
    exit 0
fi
hosts="$(seq -s, -f "$subnet.%g" 10 $((10 + nodes - 1)))"
mkdir -p "$name"
docker run --rm --user "$(id -u):$(id -g)" -v "$PWD/$name:/cluster" augur:latest \
    cluster init --dir /cluster --nodes "$nodes" --hosts "$hosts" \
    --latency "$latency" --emulate-latency "$emulate"
