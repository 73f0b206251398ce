"""A pypeln pipeline of threads, as pypeln's documentation writes one: ``pl.thread.map`` and
``pl.thread.filter`` stages with their own ``workers`` and ``maxsize``. ``resize``, two workers of
6 ms an item, limits it: the queue in front of it stays full.

    python pypeln_thread.py [ITEMS]
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
        time.sleep(0.006)
        return image * 2


def keep(image):
    with work("keep"):
        time.sleep(0.001)
        return image % 3 != 0


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 600
    stage = pl.thread.map(download, range(n), workers=1, maxsize=8)
    stage = pl.thread.map(resize, stage, workers=2, maxsize=20)
    stage = pl.thread.filter(keep, stage, workers=1, maxsize=8)
    print("kept", sorted(stage)[-3:])
