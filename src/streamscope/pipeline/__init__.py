"""Pipelines and programs, as the application runs them: ``describe`` (stages, resources,
channels, probes), ``kinds`` (what each kind of resource means), ``channels`` (the channels
between stages, by where their ends are), ``run`` (running a described pipeline) and
``program`` (programs written without streamscope: the drop-in API and unmodified programs)."""
