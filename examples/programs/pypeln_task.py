"""A pypeln pipeline of asyncio tasks, as pypeln's documentation writes one: ``pl.task.map``
stages of coroutine functions with their own ``workers`` and ``maxsize``. ``fetch_details``,
at most 4 requests of 40 ms at once (one every 10 ms), limits it: the queue in front of it
stays full. (``fetch_page`` takes 2 ms an item and what the event loop adds to each wait,
which on a loaded machine is a few milliseconds: at 20 ms a request it came near the limit.)

    python pypeln_task.py [ITEMS]
"""

import asyncio
import sys

import pypeln as pl
from _stamps import entered, left, work


async def fetch_page(url):
    with work("fetch_page"):
        await asyncio.sleep(0.002)
    entered("fetch_page -> fetch_details")
    return url


async def fetch_details(page):
    left("fetch_page -> fetch_details")
    with work("fetch_details"):
        await asyncio.sleep(0.04)
        return page + 1


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 500
    stage = pl.task.map(fetch_page, range(n), workers=1, maxsize=10)
    stage = pl.task.map(fetch_details, stage, workers=4, maxsize=40)
    print("details", sum(stage))
