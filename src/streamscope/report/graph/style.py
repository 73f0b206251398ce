"""The pipeline drawing's sizes (px) and colours, shared by its layout and its shapes."""

from __future__ import annotations

BOX_W = 200
BOX_H = 112
#: Along the layers: the space between two stages' boxes.
GAP = 240
#: Across the layers: from one box's top to the next one's.
ROW = BOX_H + 76
MARGIN = 24
LEGEND_H = 44

#: Stage states, in bar order, with their colours.
STATES = (
    ("busy", "#2563eb"),
    ("blocked_in", "#f59e0b"),
    ("blocked_out", "#dc2626"),
    ("idle", "#d1d5db"),
)
#: Curreri et al.'s (2010) process categories, drawn as a thin second bar when known.
CATEGORIES = (
    ("computation", "#059669"),
    ("communication", "#7c3aed"),
    ("other", "#9ca3af"),
)
VERDICT_COLOURS = {"consistent": "#15803d", "rejected": "#b91c1c"}
DEVICE_STROKE = "#7c3aed"
#: The bottleneck's outline.
NECK = "#dc2626"
HOST_STROKE = "#334155"
#: A channel's mean occupancy, filling its capacity.
FILL = "#0ea5e9"
