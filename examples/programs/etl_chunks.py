"""A chunked ETL on a thread pool: ``extract`` reads records in chunks, a
``ThreadPoolExecutor`` transforms the chunks (``executor.map``, as ``concurrent.futures``
documents it), and the main thread loads each result in order. Each chunk takes 8 ms to
transform (the work releases the interpreter's lock, as I/O or numpy does) on two threads,
which limit it; reading a chunk takes 1 ms, loading it 0.5 ms.

    python etl_chunks.py [CHUNKS]
"""

import sys
import time
from concurrent.futures import ThreadPoolExecutor

from _stamps import work

CHUNK = 50


def extract(chunks):
    for c in range(chunks):
        with work("extract"):
            time.sleep(0.001)
            yield list(range(c * CHUNK, (c + 1) * CHUNK))


def transform(chunk):
    with work("transform"):
        time.sleep(0.008)
        return [x * 3 for x in chunk]


def load(rows, table):
    with work("main"):
        time.sleep(0.0005)
        table.extend(rows)


if __name__ == "__main__":
    chunks = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    table = []
    with ThreadPoolExecutor(max_workers=2) as executor:
        for rows in executor.map(transform, extract(chunks)):
            load(rows, table)
    print("rows", len(table), "sum", sum(table))
