"""A ``ProcessPoolExecutor``'s queues as the program's channels.

In: a process executor the program made (``concurrent.futures.process``), its ``submit`` calls
and its manager thread's reading of results, while ``install`` is in force. Out: its call queue
a channel from the stage that submits work to the stage of the function its workers run
(``main -> square``), its result queue one back (``square -> main``), as ``multiprocessing.Pool``'s
are. The executor's own manager thread moves work items into the call queue and reads results
straight off the result queue's pipe: it is no stage; the items it moves are counted as they go
in and out, at the ends of the stages it moves them for. loky's executor (joblib's
``Parallel``) likewise. Either module is patched as it is imported (``auto.polling``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from streamscope.pipeline.program.auto.mpqueue import counts_of
from streamscope.pipeline.program.auto.patches import Patches
from streamscope.pipeline.program.auto.stages import stage, thread_tracker


def _submit(submit: Callable[..., Any]) -> Callable[..., Any]:
    """``submit`` (``map`` calls it too): the calling worker's stage puts into the call queue
    and takes from the result queue."""

    @functools.wraps(submit)
    def submit_(self: Any, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
        calls = counts_of(getattr(self, "_call_queue", None))
        if calls is not None and not calls.probe(0):
            calls.mark_tasks()  # its end markers are no calls
            thread_tracker("out", calls.id)
            who = stage()
            calls.saw("tail", who)
            results = counts_of(getattr(self, "_result_queue", None))
            if results is not None:
                results.mark_results()  # before its first worker starts
                results.saw("head", who)
        return submit(self, fn, *args, **kwargs)

    return submit_


def _read_result(read: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``wait_result_broken_or_wakeup``: a result read off the result queue's pipe is a
    removal (a worker's exit notice, its pid, is none: it was not counted in)."""

    @functools.wraps(read)
    def read_(self: Any) -> Any:
        got = read(self)
        if got[0] is not None and type(got[0]) is not int:
            results = counts_of(self.result_queue)
            if results is not None:
                results.removed()
        return got

    return read_


def process_executor(module: Any) -> Patches:
    """``concurrent.futures.process``, or loky's ``process_executor`` module: its executor's
    methods, recorded while installed (patched as the program imports it: ``auto.polling``;
    it loads ``multiprocessing``'s connections, tempfile and subprocess, some 15 ms of the
    start of a program that may never use it)."""
    return Patches({
        (module.ProcessPoolExecutor, "submit"): _submit,
        (module._ExecutorManagerThread, "wait_result_broken_or_wakeup"): _read_result,
    })  # fmt: skip


__all__ = ["process_executor"]
