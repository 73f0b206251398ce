"""Programs written without streamscope: the drop-in API (``dropin``: ``ss.Queue``, ``ss.stage``,
``ss.monitor``), what a program declared while it runs (``registry``), and unmodified programs
whose standard queues, threads, processes and tasks are watched as they are (``auto``).

In: a program's own queues and workers. Out: their stages and channels, declared as they
appear, recording into rings."""
