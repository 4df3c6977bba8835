"""When the live runner scans: a steady short period, stretched only for costly scans.

The writers flush every 2 s (the agent's steps and events, the sampler's
samples; 10 s on object storage), so a scan every ``period`` seconds (the
shortest ``scan_interval_us`` of the rules, 2 s by default) shows a finding a
period or less after its evidence reached the job folder. A scan reads only
what is new (``_live.StreamReader``), judges a buffer of bounded length
(``_buffer.LiveState``) and judges nothing when nothing new came, so its cost
does not grow with the job's age; when it is still costly (many rules, many
nodes, a slow machine), the next scan waits until the runner's CPU stays within
``CPU_SHARE`` of one core, whatever the period and the node's size: the
training owns the machine, and stepscope's own processes keep to 1% of a core
(issue 32).
"""

from __future__ import annotations

# The CPU the scans may take on average, in cores: 0.01 s of CPU a second, on any
# node. A share of the node's cores (before issue 32) gave the runner 2% of a core on
# 2 cores and 32% of one on 32: more than the cost the project promises.
CPU_SHARE = 0.01


def next_delay(period_s: float, cost_s: float, share: float = CPU_SHARE) -> float:
    """Seconds from the start of a scan that cost ``cost_s`` CPU seconds to the next.

    The period, unless the scans would then take more than ``share`` of a core:
    a scan of 0.05 s is followed by the next 5 s later.
    """
    return max(period_s, max(0.0, cost_s) / share)
