"""A process's control link to the monitor: run start and end, calibration bursts, notes, and the
frame summaries (or raw records) of agents that reduce where the data is.

In: messages from the process's own threads (never from a stage's per-item path). Out: encoded
messages on a transport, one sender at a time. A monitor that is gone never fails the
application: the link closes and says so (``closed``). Probe records do not travel here: they
stay in rings the monitor drains.
"""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING, Any

from streamscope.transport import wire
from streamscope.transport.channels import Transport
from streamscope.transport.wire import MsgType, encode

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    from streamscope.core.records import Records


class Control:
    """Sends control messages as ``agent_id`` (0: the process that runs the pipeline)."""

    def __init__(self, transport: Transport, agent_id: int = 0) -> None:
        self.agent_id = agent_id
        self._transport = transport
        self._lock = threading.Lock()
        self._pid = os.getpid()
        self.closed = False

    def send(
        self,
        mtype: MsgType,
        watermark: int,
        *,
        info: dict[str, Any] | None = None,
        records: Records | None = None,
        payload: bytes | None = None,
    ) -> bool:
        """Send one message; False when the monitor is gone (the link is closed from then on)."""
        data = encode(mtype, self.agent_id, self._pid, watermark, records, info, payload=payload)
        with self._lock:
            if self.closed:
                return False
            try:
                self._transport.send(data)
            except OSError:
                self.closed = True
                return False
        return True

    def send_calibration(
        self,
        domain_index: int,
        t1_ns: NDArray[np.int64],
        t2_ticks: NDArray[np.int64],
        t3_ns: NDArray[np.int64],
    ) -> None:
        """One calibration burst of the domain at ``domain_index`` among the run's resources."""
        import numpy as np  # a burst's; control messages alone need no numpy

        rows = np.empty(len(t1_ns), dtype=wire.EXCHANGE_DTYPE)
        rows["t1_ns"], rows["t2_ticks"], rows["t3_ns"] = t1_ns, t2_ticks, t3_ns
        data = encode(MsgType.CALIBRATION, domain_index, self._pid, 0, rows)
        with self._lock:
            if self.closed:
                return
            try:
                self._transport.send(data)
            except OSError:
                self.closed = True

    def note(self, info: dict[str, Any]) -> None:
        """Something learnt while running (a NOTE message): functions left out of tracing, a
        stage's time figures."""
        self.send(MsgType.NOTE, 0, info=info)

    def close(self) -> None:
        with self._lock:
            if self.closed:
                return
            self.closed = True
        self._transport.close()
