"""``StepRange`` and ``TimeRange``, where the SDK keeps them (its ``metrics_config``)."""

from stepscope.config import StepRange, TimeRange

__all__ = ["StepRange", "TimeRange"]
