"""A thread-pool ETL, as ``concurrent.futures`` documents ``ThreadPoolExecutor.map``: records
read in chunks, transformed on the pool (each chunk an 8 ms wait, as I/O is), loaded in order by
the main thread. Options: --items (chunks), --workers (max_workers)."""

import time
from concurrent.futures import ThreadPoolExecutor

from _truth import arg, done, save, stamps_path

CHUNKS, WORKERS = int(arg("items", 400)), int(arg("workers", 2))


def extract():
    for c in range(CHUNKS):
        yield list(range(c * 10, c * 10 + 10))


def transform(chunk):
    time.sleep(0.008)
    return [x * 3 for x in chunk]


if __name__ == "__main__":
    with ThreadPoolExecutor(max_workers=WORKERS) as executor:
        table = []
        for rows in executor.map(transform, extract()):
            table.extend(rows)
            done()
    save(stamps_path())
