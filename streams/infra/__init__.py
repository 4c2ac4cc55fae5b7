"""Real Apache Kafka and ZooKeeper servers, run from Maven Central jars with `java` on 127.0.0.1.

There is no Docker engine on the machines tribunal is built on, so this package installs the
official jars (infra/pom.xml) and supervises the JVMs itself: the same code serves `tribunal
infra`, the test fixtures and the benchmarks.
"""

from streams.infra.cluster import Cluster
from streams.infra.install import install_jars
from streams.infra.topology import Topology

__all__ = ["Cluster", "Topology", "install_jars"]
