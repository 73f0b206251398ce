"""Two ``multiprocessing.Pool``s chained with ``imap``, as the ``multiprocessing``
documentation uses them, and a slow consumer in the main process: ``parse`` results feed
``enrich``, whose results the main loop writes out, 4 ms each. The consumer limits it: results
pile up in front of it.

    python pool_imap.py [ITEMS]
"""

import multiprocessing as mp
import sys
import time

from _stamps import entered, left, work


def parse(i):
    with work("parse"):
        time.sleep(0.001)
    return i


def enrich(i):
    with work("enrich"):
        time.sleep(0.001)
    entered("enrich -> main")
    return i * 2


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 400
    written = 0
    with mp.Pool(2) as parsers, mp.Pool(2) as enrichers:
        for record in enrichers.imap_unordered(enrich, parsers.imap(parse, range(n))):
            left("enrich -> main")
            with work("main"):
                time.sleep(0.004)
                written += record
    print("written", written)
