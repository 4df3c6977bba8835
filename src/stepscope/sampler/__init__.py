"""The system sampler: a process of its own per node, started by the launcher.

It samples CPU, memory, disk, network and (through NVML) GPU counters on a fixed
schedule into ``system/<node>/`` and ``nodes/<node>.json`` of the job folder, and
takes interval changes from the control channel. Run as
``python -m stepscope.sampler.main`` (:mod:`.main`); :mod:`._probe` turns two readings
of the counters into one row. It never imports torch, pandas or DuckDB.
"""
