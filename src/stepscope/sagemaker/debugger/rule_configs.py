"""``rule_configs``: the built-in rules by the SDK's names, and the rule actions.

Profiler rules are classes in the SDK (``rule_configs.CPUBottleneck(threshold=60)``),
debugging rules functions (``rule_configs.vanishing_gradient()``); here each returns
a ``BuiltInRule`` naming a rule of stepscope's registry. Importing this module
imports no rule (the rules need pandas and DuckDB). See docs/sagemaker.md.
"""

from stepscope.sagemaker._rule_configs import *  # noqa: F403
from stepscope.sagemaker._rule_configs import __all__ as __all__
