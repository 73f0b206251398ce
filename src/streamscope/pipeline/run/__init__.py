"""Running a described pipeline: the runner and its supervisor, the processes it forks, each
process's share of taps, trackers and stage threads, the loop each stage runs, stages on an
event loop, clock calibration bursts, and what the runner needs from a cluster.

In: a ``Pipeline``, its probes and the monitor's control link. Out: the stages run, their
records in rings, how each ended."""
