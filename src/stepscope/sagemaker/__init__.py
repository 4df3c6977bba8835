"""``stepscope.sagemaker``: code written for the SageMaker Python SDK, run locally.

Change ``from sagemaker.debugger import ...`` to ``from stepscope.sagemaker.debugger
import ...`` (and ``sagemaker.pytorch``, ``sagemaker.tensorflow``): the
configuration classes map onto stepscope's own (:mod:`stepscope.config`, the rule
registry), and the estimators' ``fit()`` runs the entry point under stepscope on
this machine. Importing this package imports no framework and no rule.
See docs/sagemaker.md.
"""

from stepscope.sagemaker._job import TrainingJobError
from stepscope.sagemaker._platform import PlatformArgumentWarning
from stepscope.sagemaker._profiler import Profiler, ProfilerConfig

__all__ = ["PlatformArgumentWarning", "Profiler", "ProfilerConfig", "TrainingJobError"]
