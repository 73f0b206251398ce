"""The agents that reduce beside the program, on the resource they watch: a device's shipper
(``ship``), the sub-queues a device reduces itself (``assignments``, ``device``) and a cluster
host's frames (``host``). Each ships frames or records on its control link; the monitor merges
what they send.

In: the resource's own rings and the plan's share for it. Out: SUMMARY and BATCH messages."""
