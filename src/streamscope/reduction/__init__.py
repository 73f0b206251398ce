"""Records into frames, wherever that happens: the monitor process, a cluster host's agent and a
device's agent run the same streams, routing, reducers and ledger, so a frame reads the same
wherever it was closed (query → reduction → agents → pipeline → monitor).

In: decoded records (``core.records``) in one clock's ticks and the compiled plan's (query,
target) pairs. Out: each pair's ``FrameResult``s as its frames close."""
