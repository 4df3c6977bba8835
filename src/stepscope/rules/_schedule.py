"""When the live runner scans: a steady short period, stretched only for costly scans.

The writers flush every 2 s (the agent's steps and events, the sampler's
samples; 10 s on object storage), so a scan every ``period`` seconds (the
shortest ``scan_interval_us`` of the rules, 2 s by default) shows a finding a
period or less after its evidence reached the job folder. A scan reads only
what is new (``_live.StreamReader``) and judges a buffer of bounded length
(``_buffer.LiveState``), so its cost does not grow with the job's age; when it
is still costly (many nodes, many rules), the next scan waits until the
runner's CPU stays within ``CPU_SHARE`` of the node's cores, whatever the
period: the training owns the machine.
"""

from __future__ import annotations

import os

# The share of the node's CPU (all its cores) the scans may take on average:
# 1% is 0.02 s of CPU a second on 2 cores, 0.32 s on 32.
CPU_SHARE = 0.01


def node_cores() -> int:
    """The cores this process may run on (its affinity, as a container sets it)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def next_delay(period_s: float, cost_s: float, cores: int, share: float = CPU_SHARE) -> float:
    """Seconds from the start of a scan that cost ``cost_s`` CPU seconds to the next.

    The period, unless the scans would then take more than ``share`` of the
    ``cores``: a scan of 0.5 s on 2 cores is followed by the next 25 s later.
    """
    budget = share * max(1, cores)  # CPU seconds per second the scans may use
    return max(period_s, max(0.0, cost_s) / budget)
