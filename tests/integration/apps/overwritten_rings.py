"""Two threads on a ``queue.Queue`` whose run's rings a test overwrites halfway: the main thread
puts ``N`` items, says where the run's rings are (``DIR/rings``), waits until the test says it
overwrote them (``DIR/go``), puts ``N`` more and ``None``; then prints what the sink took.

    streamscope run overwritten_rings.py -- DIR
"""

import json
import os
import queue
import sys
import threading
import time
from pathlib import Path

from streamscope.pipeline.program.registry import SESSION_ENV

N = 200
here = Path(sys.argv[1])
q: queue.Queue = queue.Queue(16)
got: list[int] = []


def sink() -> None:
    while (x := q.get()) is not None:
        got.append(x)


t = threading.Thread(target=sink)
t.start()
for i in range(N):
    q.put(i)
(here / "rings.part").write_text(json.loads(os.environ[SESSION_ENV])["dir"])
os.replace(here / "rings.part", here / "rings")
while not (here / "go").exists():
    time.sleep(0.002)
for i in range(N, 2 * N):
    q.put(i)
q.put(None)
t.join()
print(f"took {len(got)} items, sum {sum(got)}, in order: {got == list(range(2 * N))}")
