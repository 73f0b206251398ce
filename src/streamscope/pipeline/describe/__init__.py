"""Describing a pipeline: its stages, the resources they run on, the channels between them and
the probes declared on them, each recorded as a frozen spec and checked (``pipeline.Pipeline``).

In: the user's calls (``add``, ``connect``, ``probe``). Out: specs and the pipeline's
``Topology``; nothing runs here."""
