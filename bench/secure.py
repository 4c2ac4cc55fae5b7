"""What SASL_SSL costs the worker: the exactly-once backlog phase of bench/e2e.py on a plaintext stack and on the
secured one (`tribunal infra up --secure`: SASL_SSL, SCRAM-SHA-512, ACLs), one after the other (issue 15).

On the secured stack the worker runs as its principal with the grants of `tribunal infra acl apply`; the bench's own
producer and reader sign in as the stack's administrator.
Run: `.venv/bin/python bench/secure.py [--records 20000]`.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import tempfile
from pathlib import Path

import e2e  # type: ignore[import-not-found]
from machine import describe, local_stack  # type: ignore[import-not-found]

from streams import kafka
from streams.infra import Cluster, Topology
from streams.infra.topology import free_ports
from streams.settings import Settings


def secured_phase(records: int) -> float:
    with tempfile.TemporaryDirectory(prefix="tribunal-secure-bench-") as tmp:
        zk, broker, controller = free_ports(3)
        cluster = Cluster(Topology(home=Path(tmp), kafka_port=broker, controller_port=controller, zk_port=zk,
                                   secure=True))
        cluster.up()
        try:
            credentials, bootstrap = cluster.topology.credentials, cluster.topology.bootstrap
            e2e.SECURITY.update(kafka.security(Settings.model_validate(credentials.settings("admin"))))
            name = "bench0"
            admin = {**os.environ, **credentials.env("admin"), "KAFKA_BOOTSTRAP": bootstrap,
                     "TRIBUNAL_TOPIC_PREFIX": f"{name}.", "TRIBUNAL_APP_ID": name}
            subprocess.run([e2e.TRIBUNAL, "infra", "acl", "apply"], env=admin, check=True, capture_output=True)
            os.environ.update(credentials.env("worker"))  # what worker_env passes on to `topics create` and the worker
            try:
                result = asyncio.run(e2e.run_phase(bootstrap, e2e.Phase("backlog, SASL_SSL", records), 0,
                                                   Path(tmp)))
            finally:
                for key in credentials.env("worker"):
                    os.environ.pop(key, None)
                e2e.SECURITY.clear()
            return float(result.throughput)
        finally:
            cluster.down()


def plain_phase(records: int) -> float:
    with local_stack("secure-bench") as cluster:
        result = asyncio.run(e2e.run_phase(cluster.topology.bootstrap, e2e.Phase("backlog, PLAINTEXT", records), 0,
                                           cluster.topology.home))
        return float(result.throughput)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=20_000)
    args = parser.parse_args()
    plain = plain_phase(args.records)
    secured = secured_phase(args.records)
    print(describe())
    print(f"tribunal backlog, exactly-once, {args.records} records: PLAINTEXT {plain:,.0f}/s, "
          f"SASL_SSL {secured:,.0f}/s; ratio SASL_SSL/PLAINTEXT {secured / plain:.2f}")


if __name__ == "__main__":
    main()
