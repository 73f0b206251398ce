"""A run's stages on the hosts of a cluster (the runner's ``RemoteHosts``, on Ray).

In: a started or joined ``RayCluster``, the monitor's socket, and per host its stages. Out: on
each host's node a worker running that host's stages, a clock responder reading the clock they
read, and the network links between hosts; a collector on the monitor's own node hands every
host agent's messages to the monitor, in order per agent.

Only what the hosts' agents send crosses the network: frame summaries of the sub-queues they
reduce, their stages' state frames, the frames of the queries they reduce themselves
(``agents.host``), the records the monitor reads itself (a traced run's), notes. The
stages' items cross in the links' batches, by value in the calls, with their insertion ticks
where the consumer's host pairs them (a link's latency).

The room, by concern: ``cluster`` (a Ray cluster started or joined, its nodes' processes in
``nodeprocs``), ``channel`` (a bounded queue on a host's node), ``link`` (a channel between
hosts), ``clock`` (each host's clock read by round trips), ``collector`` (every agent's
messages to the monitor), ``worker`` (a host's stages run on its node), ``adapter`` (all of it
as the runner sees it: ``ClusterHosts``). Nothing here imports Ray as it is imported.
"""
