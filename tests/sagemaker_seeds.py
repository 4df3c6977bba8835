"""The code blocks of the seeds (../shared/seeds/) that configure profiling, rules or
the debugger hook, extracted for tests/test_sagemaker_seeds.py.

The seeds are documentation pages saved as text: code blocks are fenced (```), or
plain lines between prose, or squashed onto one line by the page's conversion.
:func:`snippets` finds them; :func:`rewrite` changes only their imports
(``sagemaker`` -> ``stepscope.sagemaker``); :func:`fill` fills the placeholders
the pages leave (``...``, ``BuiltInRuleName``, ``<parameter_name> = value``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

SEEDS = Path("/work/shared/seeds")
# Where a plain code block starts, and what a line inside one looks like.
_START = re.compile(r"^(from sagemaker|import sagemaker|[a-z_]\w*\s*=\s*[\[\w])")
_CODE = re.compile(r"^(\s|from |import |[a-z_][\w.]*\s*=|[\w.]+\(|[)\]}]|#|$)")
_SQUASHED = re.compile(r"^(from sagemaker|rules\s*=)")
_TOPICS = ("ProfilerConfig", "ProfilerRule", "Rule.sagemaker", "DebuggerHookConfig", "rules")


@dataclass(frozen=True)
class Snippet:
    """One code block: the seed file it comes from, its number there, its code."""

    seed: str
    index: int
    code: str

    @property
    def id(self) -> str:
        return f"{self.seed[:3]}-{self.index}"


def _plain_blocks(text: str) -> list[str]:
    blocks, current = [], []
    for line in text.splitlines():
        if current and not _CODE.match(line):
            blocks.append("\n".join(current).strip())
            current = []
        if current or _START.match(line):
            current.append(line)
    if current:
        blocks.append("\n".join(current).strip())
    return blocks


def _squashed(line: str) -> str:
    """A code block the page conversion put on one line, back on several."""
    line = re.sub(r"\s(rules\s*=)", r"\n\1", line)
    return line.strip()


def _blocks(text: str) -> list[str]:
    fenced = re.findall(r"```python\n(.*?)```", text, re.S)
    if fenced:
        return [b.strip() for b in fenced]
    lines = text.splitlines()
    squashed = [_squashed(ln) for ln in lines if _SQUASHED.match(ln) and "rule_configs." in ln]
    return squashed or _plain_blocks(text)


def snippets() -> list[Snippet]:
    """Every distinct seed code block about profiling, rules or the debugger hook."""
    out: list[Snippet] = []
    seen: set[str] = set()
    for path in sorted(SEEDS.glob("*.txt")):
        for i, code in enumerate(_blocks(path.read_text(encoding="utf-8"))):
            if code in seen or not any(t in code for t in _TOPICS):
                continue
            seen.add(code)
            out.append(Snippet(path.name, i, code))
    return out


def prepare(snippet: Snippet) -> str:
    """The snippet as the test runs it: placeholders filled, then imports rewritten."""
    return rewrite(fill(snippet.code))


def rewrite(code: str) -> str:
    """Only the imports changed: ``sagemaker`` becomes ``stepscope.sagemaker``."""
    code = re.sub(
        r"^import sagemaker$", "import stepscope.sagemaker as sagemaker", code, flags=re.M
    )
    return re.sub(r"\bfrom sagemaker\b", "from stepscope.sagemaker", code)


# The estimator arguments the pages leave as "..." (the test's training script).
ESTIMATOR_ARGS = "entry_point=ENTRY_POINT, source_dir=SOURCE_DIR, hyperparameters=HYPERPARAMETERS,"


# Names a page uses without importing or defining them, and what the test gives them.
MISSING_IMPORTS = (
    "CollectionConfig",
    "DataloaderProfilingConfig",
    "DebuggerHookConfig",
    "DetailedProfilingConfig",
    "PythonProfilingConfig",
)
UNDEFINED = {
    "s3_bucket_for_tensors": '"s3://my-bucket/tensors"',
    "hook_config": "debugger_hook_config",  # 004 names its hook config both ways
}


def _imported(code: str, name: str) -> bool:
    return bool(re.search(rf"^(from|import) .*\b{name}\b", code, re.M))


def fill(code: str) -> str:
    """The pages' placeholders filled in with real rules, parameters and arguments
    (and the imports and names a page leaves out, as the page's own module spells them)."""
    missing = [
        n for n in MISSING_IMPORTS if re.search(rf"\b{n}\(", code) and not _imported(code, n)
    ]
    head = [f"from sagemaker.debugger import {n}" for n in missing]
    for name, value in UNDEFINED.items():
        if re.search(rf"\b{name}\b", code) and not re.search(rf"^\s*{name}\s*=", code, re.M):
            head.append(f"{name} = {value}")
    code = "\n".join([*head, code])
    code = re.sub(r"\.\.\. ?# Set up other essential parameters.*", ESTIMATOR_ARGS, code)
    code = re.sub(r"(\(\n\s*)\.\.\.\n", rf"\1{ESTIMATOR_ARGS}\n", code)  # Estimator(\n ...
    code = code.replace("Rule.sagemaker(...)", "Rule.sagemaker(rule_configs.vanishing_gradient())")
    code = re.sub(r"^\s*\.\.\.,?\s*$\n?", "", code, flags=re.M)  # "more rules here"
    code = code.replace("BuiltInRuleName_1", "CPUBottleneck")
    code = code.replace("BuiltInRuleName_2", "StepOutlier")
    code = code.replace("BuiltInRuleName_n", "LoadBalancing")
    code = re.sub(r"\),\s*\.\.\.\s*ProfilerRule", "), ProfilerRule", code)  # "rules 3 to n-1"
    code = code.replace("<BuiltInRuleName>_<parameter_name> = value", "StepOutlier_stddev = 3")
    code = code.replace("rule_configs.BuiltInRuleName()", "rule_configs.CPUBottleneck()")
    code = code.replace('"key": "value"', '"cpu_threshold": "80"')
    return code
