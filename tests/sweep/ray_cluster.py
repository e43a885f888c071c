"""A two-node Ray cluster on 127.0.0.1 in a process of its own, for tests/sweep/test_ray.py.

Ray's ``cluster_utils.Cluster`` changes the process that starts it: it makes it a process-group leader,
installs a SIGTERM handler that calls ``sys.exit``, and starts a reaper that SIGTERMs the whole group
when its pipe closes. Inside pytest that later ends an unrelated test, so the cluster lives here.

Prints one JSON line ``{"address", "head", "worker"}`` once both nodes are up, then reads commands from
stdin: ``remove-worker`` (answers ``removed``); end of input shuts the cluster down.
"""

from __future__ import annotations

import json
import sys

from ray.cluster_utils import Cluster


def main() -> None:
    cluster = Cluster(initialize_head=False)
    try:
        head = cluster.add_node(num_cpus=1, node_ip_address="127.0.0.1", include_dashboard=False)
        worker = cluster.add_node(num_cpus=1, node_ip_address="127.0.0.1")
        cluster.wait_for_nodes()
        print(json.dumps({"address": cluster.address, "head": head.node_id, "worker": worker.node_id}), flush=True)
        for line in sys.stdin:
            if line.strip() == "remove-worker":
                cluster.remove_node(worker)
                print("removed", flush=True)
    finally:
        cluster.shutdown()


if __name__ == "__main__":
    main()
