"""How a run's monitor reduces and what it keeps: one frozen value, the same for a monitor in a
process of its own (written to and read from its config file) and one in a thread.

In: the run's ``RunOptions`` whole (resolved once, at the API or the command line), its
metadata, and where validation runs' true times are. Out: ``MonitorSettings``, and its JSON form.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from streamscope.core.options import RunOptions
from streamscope.store.writer import RunMeta


@dataclass(frozen=True, slots=True)
class MonitorSettings:
    """``meta``: the run's (its start is filled in when it starts); ``options``: the run's, as
    the application resolved them (the drop counts' frame, the clock fit, the stall limit,
    whether every record is kept, the flight recorder's size, ...); ``truth_dir``: validation
    runs' true times (read after every estimate)."""

    meta: RunMeta
    options: RunOptions
    truth_dir: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"meta": asdict(self.meta), "options": self.options.to_dict(),
                "truth_dir": self.truth_dir}  # fmt: skip

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> MonitorSettings:
        m = d["meta"]
        return cls(
            meta=RunMeta(**{**m, "argv": tuple(m["argv"])}),
            options=RunOptions.from_dict(d["options"]),
            truth_dir=d.get("truth_dir"),
        )
