"""An asyncio TCP service, as asyncio's streams documentation writes one: ``asyncio.start_server``
with a ``handle`` coroutine per connection that reads a request line, works on it (8 ms: a call
to a backend) and writes the reply. Four clients in the same program send their requests one
after another, each waiting for its reply (``asyncio.open_connection``). The handlers' work
limits it: the clients wait on them.

    python tcp_service.py [REQUESTS]
"""

import asyncio
import sys

from _stamps import work

CLIENTS = 4


async def handle(reader, writer):
    while line := await reader.readline():
        with work("handle"):
            await asyncio.sleep(0.008)
            reply = line.upper()
        writer.write(reply)
        await writer.drain()
    writer.close()
    await writer.wait_closed()


async def client(port, n, replies):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    for i in range(n):
        writer.write(f"request {i}\n".encode())
        await writer.drain()
        replies.append(await reader.readline())
    writer.close()
    await writer.wait_closed()


async def main(n):
    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    replies = []
    async with server:
        await asyncio.gather(*(client(port, n // CLIENTS, replies) for _ in range(CLIENTS)))
    print("replies", len(replies), "ok", all(r.startswith(b"REQUEST") for r in replies))


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 400))
