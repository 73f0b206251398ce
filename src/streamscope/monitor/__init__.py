"""The monitor process: rings and control messages in, frames in the run file out (rings and
transport → timebase → aggregate → store)."""
