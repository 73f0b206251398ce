"""Two Ray actors around a ``ray.util.queue.Queue(8)``, as Ray's documentation passes items
between actors. streamscope does not watch Ray's actors, tasks or queues: its run says so.

    python ray_actors.py [ITEMS]
"""

import os
import sys
import tempfile

import ray
from ray.util.queue import Queue


@ray.remote
class Producer:
    def run(self, q, n):
        for i in range(n):
            q.put(i)
        q.put(None)
        return n


@ray.remote
class Consumer:
    def run(self, q):
        total = 0
        while (x := q.get()) is not None:
            total += x
        return total


if __name__ == "__main__":
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    ray.init(
        num_cpus=2, include_dashboard=False, log_to_driver=False,
        _node_ip_address="127.0.0.1", _temp_dir=tempfile.mkdtemp(prefix="ray-"),
    )  # fmt: skip
    q = Queue(maxsize=8)
    producer, consumer = Producer.remote(), Consumer.remote()
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    _, total = ray.get([producer.run.remote(q, n), consumer.run.remote(q)])
    print("sum", total)
    ray.shutdown()
