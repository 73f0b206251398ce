"""The monitor process: rings and control messages in, frames in the run file out (rings and
transport → timebase → aggregate → store)."""

#: What the monitor process is named where ``streamscope run`` forks it (``/proc/PID/comm``,
#: what ``top`` and ``pgrep`` show; its command line is the command's).
PROCESS_NAME = "streamscope-mon"
