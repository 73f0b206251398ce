"""A pypeln pipeline of processs, as pypeln's documentation writes one: ``pl.process.map`` and
``pl.process.filter`` stages with their own ``workers`` and ``maxsize``. ``resize``, two workers of
60 ms an item, limits it: the queue in front of it stays full. (pypeln's process queues ask a
manager process whether the run failed or is done at every get: ~1 ms an item on a quiet
machine, several beside busy cores, that is neither the stage's own code, which the program
stamps, nor a wait for its input: busy, as the library's work for the stage; at 60 ms an item,
a few percent of its time.)

    python pypeln_process.py [ITEMS]
"""

import sys
import time

import pypeln as pl
from _stamps import entered, left, work


def download(url):
    with work("download"):
        time.sleep(0.001)
    entered("download -> resize")
    return url


def resize(image):
    left("download -> resize")
    with work("resize"):
        time.sleep(0.060)
        return image * 2


def keep(image):
    with work("keep"):
        time.sleep(0.001)
        return image % 3 != 0


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 300
    stage = pl.process.map(download, range(n), workers=1, maxsize=8)
    stage = pl.process.map(resize, stage, workers=2, maxsize=20)
    stage = pl.process.filter(keep, stage, workers=1, maxsize=8)
    print("kept", sorted(stage)[-3:])
