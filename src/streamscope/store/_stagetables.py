"""The run file's per-stage tables over the whole run: stalls, each worker's states, traced
functions' profiles, and what the monitoring itself cost.

In: nothing (declarations). Out: one ``Table`` per such table, for ``schema.TABLES``.
"""

from __future__ import annotations

from streamscope.store.table import Column, Table

_C = Column

STALL = Table(
    "stall",
    "Stages busy for longer than the run's stall limit without finishing anything (no "
    "state change): hung, or one item takes that long.",
    (
        _C("stage", "VARCHAR NOT NULL", "the stage (stage.name)"),
        _C("start_ns", "BIGINT NOT NULL", "virtual ns of its last state change before"),
        _C("end_ns", "BIGINT NOT NULL", "virtual ns it went on (or the run ended)"),
        _C(
            "ongoing",
            "BOOLEAN NOT NULL",
            "never went on (still busy at the end, or stopped so)",
        ),
    ),
)

WORKER = Table(
    "worker",
    "Each worker of each stage (a thread, process or task with a state probe of its own), "
    "its time in each state over the run: the per-worker breakdown of a stage worked in by "
    "several.",
    (
        _C("stage", "VARCHAR NOT NULL", "the stage (stage.name)"),
        _C("probe_id", "INTEGER NOT NULL", "the worker's state probe (probe.id)"),
        _C("resource", "VARCHAR NOT NULL", "where it ran (resource.name)"),
        _C("idle_ns", "BIGINT NOT NULL", "ns idle"),
        _C("busy_ns", "BIGINT NOT NULL", "ns busy"),
        _C("blocked_in_ns", "BIGINT NOT NULL", "ns waiting for an input"),
        _C("blocked_out_ns", "BIGINT NOT NULL", "ns waiting for room in an output"),
        _C("unknown_ns", "BIGINT NOT NULL", "ns unknown (records refused, or gone)"),
        _C(
            "began_ns",
            "BIGINT NOT NULL",
            "ns into the run its first state record came (a "
            "worker that began late: a pool's process forked, a thread started; -1: none)",
        ),
    ),
)

PROFILE = Table(
    "profile",
    "Per stage and traced function, over the run: calls and time, from enter/exit events.",
    (
        _C("stage", "VARCHAR NOT NULL", "the stage whose thread made the calls"),
        _C("function_id", "INTEGER NOT NULL", "the function (function.id)"),
        _C("calls", "BIGINT NOT NULL", "calls that returned (or were open at the end)"),
        _C("total_ns", "DOUBLE NOT NULL", "time inside the function, callees included"),
        _C("self_ns", "DOUBLE NOT NULL", "time inside the function, callees excluded"),
        _C("max_ns", "DOUBLE NOT NULL", "the longest call"),
    ),
)

TRACE_EXCLUSION = Table(
    "trace_exclusion",
    "Functions left out of tracing: by name pattern, or during the run for being called "
    "more often than the limit.",
    (
        _C("name", "VARCHAR NOT NULL", "module:qualname"),
        _C("reason", "VARCHAR NOT NULL", "the pattern, or the call rate and the limit"),
    ),
)

NOTE = Table(
    "note",
    "What the run says of itself besides its figures: what a program used that is not "
    "watched, processes of its that outlived it, a run that found no stage or channel, a "
    "path whose mean latency is from Little's law, a ring something else overwrote.",
    (
        _C(
            "about",
            "VARCHAR NOT NULL",
            "what the note concerns: unwatched, outlived, empty, littles_law, damaged",
        ),
        _C("text", "VARCHAR NOT NULL", "the note, in words"),
    ),
)

LEFTOVER = Table(
    "leftover",
    "Items still in each channel when it or the run ended (inserted, never removed), and "
    "their time in it until then: the mean occupancy L counts that time, the latency W none "
    "of it (those items never came out), so Little's law is checked on L less it.",
    (
        _C("channel", "VARCHAR NOT NULL", "the channel (channel.name)"),
        _C("items", "BIGINT NOT NULL", "items it held at its end (their insertions recorded)"),
        _C("ns", "BIGINT NOT NULL", "their ns in it until that end, added"),
    ),
)

ENDED = Table(
    "ended",
    "Channels and stages that ended while the run went on: a queue the program dropped "
    "(its name not taken up by another queue of the same ends), a stage all of whose workers "
    "ended. Their frames stop at the frame holding their end.",
    (
        _C("kind", "VARCHAR NOT NULL", "channel or stage"),
        _C("name", "VARCHAR NOT NULL", "the channel's or stage's name"),
        _C("t_end_ns", "BIGINT NOT NULL", "when it ended (virtual ns since the run's start)"),
    ),
)

OVERHEAD = Table(
    "overhead",
    "The monitoring's own cost, per probe over the run: events it handled (kept or "
    "refused) and the time they took: one event in 1024 is timed by the probe core while "
    "the run goes on, plus, for probes that Python code calls, what that call adds (timed "
    "by the monitor).",
    (
        _C("probe_id", "INTEGER NOT NULL", "the probe (probe.id)"),
        _C("events", "BIGINT NOT NULL", "records kept plus records refused"),
        _C("est_probe_ns", "DOUBLE NOT NULL", "estimated ns spent in the probe"),
        _C("ns_per_event", "DOUBLE NOT NULL", "the cost of one event"),
        _C("measured", "VARCHAR NOT NULL", "how ns_per_event was obtained"),
    ),
)

RUNNER = Table(
    "runner",
    "Where each stage thread's CPU time went, measured while it ran (pipelines run by "
    "streamscope): its own code on the items timed (one about every half millisecond of the "
    "stage's time), the rest is the runner's loop, the channels and the probes.",
    (
        _C("stage", "VARCHAR NOT NULL", "the stage (stage.name)"),
        _C("items", "BIGINT NOT NULL", "items the stage took (a source: made)"),
        _C("samples", "BIGINT NOT NULL", "items whose own-code CPU time was measured"),
        _C("user_ns", "BIGINT NOT NULL", "CPU ns in the stage's own code over the samples"),
        _C("cpu_ns", "BIGINT NOT NULL", "the stage thread's CPU ns from its start to its end"),
        _C("items_out", "BIGINT NOT NULL", "items the stage put (a broadcast counted once)"),
        _C("user_wall_ns", "BIGINT NOT NULL", "wall ns in the stage's own code over the samples"),
        _C(
            "runq_ns",
            "BIGINT NOT NULL",
            "the thread's ns runnable but waiting for a core (the OS's run queue; 0: not known)",
        ),
        _C("switch_ns", "BIGINT NOT NULL", "its interpreter's switch interval (ns) at its end"),
    ),
)

MACHINE = Table(
    "machine",
    "The machine the pipeline's process ran on, while its stages ran: the CPU time every CPU "
    "spent busy (/proc/stat), whatever ran (this run's processes and any other), and the wall "
    "time: what else loaded the machine, for the what-if model. For a program run as it is: "
    "while the program ran, less the CPU time of the program's own processes, of the "
    "command that ran it and of the monitor (what else ran).",
    (
        _C("host", "VARCHAR NOT NULL", "main: the pipeline's own machine"),
        _C("busy_ns", "BIGINT NOT NULL", "CPU ns the machine's CPUs spent busy, all added"),
        _C("wall_ns", "BIGINT NOT NULL", "wall ns from the run's start to its stages' end"),
        _C(
            "setup_ns",
            "BIGINT NOT NULL",
            "a program's: CPU ns its process spent loading streamscope before the program's "
            "first line, and its processes' threads making threads stages' workers and queues "
            "channels (claims, declarations, rings: measured around that work, no probe event "
            "counts it); 0 for a pipeline",
        ),
        _C("threads", "BIGINT NOT NULL", "a program's threads made stages' workers"),
        _C("queues", "BIGINT NOT NULL", "a program's queues made channels"),
    ),
)

SERVICE = Table(
    "service",
    "Service times: the wall time of a stage's own code on one item, what the what-if model "
    "draws from. A pipeline run by streamscope: measured by its runner on one item about "
    "every half millisecond of the stage's time (every item slower than that; one in 1024 at "
    "most; for a source, its generator's step), at most 4096 per stage thread. A program's "
    "stage: sampled by its workers' state trackers, one "
    "item at most every millisecond per worker (each proportionally less often in a process "
    "of more than eight: some 8,000 a second in all; the time it was busy from taking the item to "
    "taking the next, its waits left out; a source's from one put to the next), with the "
    "thread's CPU time over it, at most 4096 per stage (a uniform sample of the run).",
    (
        _C("stage", "VARCHAR NOT NULL", "the stage (stage.name)"),
        _C("wall_ns", "BIGINT NOT NULL", "ns in the stage's own code on one item"),
        _C(
            "cpu_ns",
            "BIGINT",
            "the worker thread's CPU ns over the same item; NULL: not read "
            "(a pipeline runner's sample; an asyncio task's, whose thread is its loop's)",
        ),
        _C(
            "runq_ns",
            "BIGINT",
            "the worker thread's ns runnable but waiting for a core over the same item (the "
            "OS's run queue); NULL: not read (as cpu_ns, or where the OS does not say)",
        ),
    ),
)

LINK = Table(
    "link",
    "Each channel between cluster hosts (a network link): the batches its sender sent, and "
    "how many reached the receiver after their time (the network slower than the link's "
    "transfer and latency, which its virtual queue's model assumes).",
    (
        _C("channel", "VARCHAR NOT NULL", "the channel (channel.name)"),
        _C("transfers", "BIGINT NOT NULL", "batches sent"),
        _C("late", "BIGINT NOT NULL", "batches that arrived after their delivery time"),
        _C("late_ns", "BIGINT NOT NULL", "by how much they were late, in all (ns)"),
    ),
)

HOST = Table(
    "host",
    "Each cluster host's traffic to the monitor over the network: the messages and bytes its "
    "agent sent (frame summaries, the records queries measure directly, notes), and the "
    "records it reduced itself rather than send (24 bytes each as records).",
    (
        _C("host", "VARCHAR NOT NULL", "the host (resource.name)"),
        _C("messages", "BIGINT NOT NULL", "messages its agent sent"),
        _C("bytes", "BIGINT NOT NULL", "bytes its agent sent"),
        _C("kept_records", "BIGINT NOT NULL", "records reduced on the host, not sent"),
    ),
)

CORE = Table(
    "core",
    "Each probe core an RTL device simulated: what it reduced, the cycles it ran, and the "
    "records that met a cycle the register bus held and played later (on real hardware the "
    "design and the bus run side by side).",
    (
        _C("resource", "VARCHAR NOT NULL", "the RTL device (resource.name)"),
        _C("core", "VARCHAR NOT NULL", "the core and what it watches ('channel avg -> print')"),
        _C("cycles", "BIGINT NOT NULL", "cycles simulated (idle stretches: one cycle each)"),
        _C("frames", "BIGINT NOT NULL", "frames it reduced and the host read"),
        _C("shifted", "BIGINT NOT NULL", "records played later than their tick"),
        _C("most_shifted", "BIGINT NOT NULL", "by how many ticks at most"),
    ),
)

STACKS = Table(
    "stacks",
    "Where each stage's time went: its workers' Python stacks, sampled about 100 times a "
    "second each by a thread of each process that reads them without the interpreter lock "
    "(fewer while that thread takes more than half a percent of a core; a worker at rest, "
    "among more than 64, one pass in 2^k, each of its samples standing for 2^k periods), "
    "counted per frame, "
    "state and stack. A busy worker is 'running' when its thread was on a core (or runnable) "
    "at the sample, 'waiting' when it was not (asleep, on I/O or a lock, the interpreter's "
    "included; an asyncio task awaiting, with no stack then). At most 1024 stacks per stage "
    "are told apart; the rest are '[other stacks]'.",
    (
        _C("t_ns", "BIGINT NOT NULL", "the frame's start (virtual ns since the run's start)"),
        _C("frame_ns", "BIGINT NOT NULL", "the frame's length (ns)"),
        _C("stage", "VARCHAR NOT NULL", "the stage (stage.name)"),
        _C(
            "state",
            "VARCHAR NOT NULL",
            "running, waiting (both busy), blocked_in, blocked_out or idle",
        ),
        _C(
            "stack",
            "VARCHAR NOT NULL",
            "its frames from the root, 'function (file.py:first line)' joined by ';' "
            "(streamscope's own left out); '' when none was read (not busy, or a task "
            "awaiting)",
        ),
        _C("samples", "BIGINT NOT NULL", "samples of it"),
        _C("ns", "BIGINT NOT NULL", "the time they stand for (each its sampler's period then)"),
    ),
)

STACK_ID = Table(
    "stack_id",
    "Each process's stacks by the id its sampler gave them: what the value of a STACK record "
    "kept in the record table names (its low 24 bits), for timelines of samples.",
    (
        _C("probe", "BIGINT NOT NULL", "the sampler's probe (probe.id)"),
        _C("id", "BIGINT NOT NULL", "the stack's id in that process"),
        _C("stack", "VARCHAR NOT NULL", "its frames from the root, as in stacks.stack"),
    ),
)

STACK_SAMPLER = Table(
    "stack_sampler",
    "What each process's stack sampler cost: its thread's CPU time and samples, over its "
    "wall time (as of its last account, once a second and at the end).",
    (
        _C("probe", "BIGINT NOT NULL", "its probe (probe.id)"),
        _C("process", "VARCHAR NOT NULL", "the process (a resource's name)"),
        _C(
            "priority",
            "VARCHAR NOT NULL",
            "its thread's: realtime (the lowest real-time priority), nice -10, or normal where "
            "neither was allowed; a normal one on a machine with no core free takes its "
            "samples when one frees (a worker going to sleep), and they lean towards waits",
        ),
        _C("period_ns", "BIGINT NOT NULL", "the period asked for (ns)"),
        _C("samples", "BIGINT NOT NULL", "samples taken, one per worker per period"),
        _C("cpu_ns", "BIGINT NOT NULL", "its thread's CPU time (ns)"),
        _C("wall_ns", "BIGINT NOT NULL", "the wall time it ran (ns)"),
    ),
)

MONITOR = Table(
    "monitor",
    "The monitor's own figures per frame of the run: how far behind the application it was "
    "and what it spent (it runs in a process of its own).",
    (
        _C("frame", "BIGINT NOT NULL", "frame number (of the run's default frame)"),
        _C(
            "lag_ns",
            "BIGINT NOT NULL",
            "the most, over the frame, by which the reduced timeline trailed real time",
        ),
        _C("records", "BIGINT NOT NULL", "records drained from the rings in the frame"),
        _C("cpu_ns", "BIGINT NOT NULL", "the monitor process's CPU time in the frame"),
        _C("drains", "BIGINT NOT NULL", "drain cycles in the frame"),
    ),
)

__all__ = [
    "ENDED",
    "LEFTOVER",
    "MACHINE",
    "MONITOR",
    "NOTE",
    "OVERHEAD",
    "PROFILE",
    "RUNNER",
    "SERVICE",
    "STACKS",
    "STACK_ID",
    "STACK_SAMPLER",
    "STALL",
    "TRACE_EXCLUSION",
    "WORKER",
]
