"""Process plumbing shared by the launcher and its helper processes.

The sampler and the live rule runner run beside the training command; both must
end when it (or the launcher) ends, and must yield the CPU to it. :mod:`._exitwatch`
sleeps until a watched process exits (pidfd where the kernel has it);
:mod:`._background` lowers a helper's priority; :mod:`._word` carries the launcher's
word that the job has ended; :mod:`._progress` carries a helper's progress to the
launcher (is it hung?); :mod:`._spawn` starts the training command with SIGINT not ignored (a stop
request's signal); :mod:`._alloc` makes a stepscope process give freed memory
back (the CLI's long evaluations). They import only the standard library (psutil on first
use), so importing this package costs nothing.
"""

from stepscope.process._alloc import give_back_freed_memory
from stepscope.process._background import (
    HELPER_NICE,
    add_nice_option,
    exit_at_once,
    helper_env,
    imports_without_gc,
    lower_priority,
)
from stepscope.process._exitwatch import ExitWatch, pidfd, process, wait_child
from stepscope.process._progress import (
    STACK_SIGNAL,
    ProgressFile,
    ProgressWriter,
    dump_stack_on_signal,
)
from stepscope.process._spawn import spawn_interruptible
from stepscope.process._word import Word, give_word, word_pipe

__all__ = [
    "HELPER_NICE",
    "STACK_SIGNAL",
    "ExitWatch",
    "ProgressFile",
    "ProgressWriter",
    "Word",
    "add_nice_option",
    "dump_stack_on_signal",
    "exit_at_once",
    "give_back_freed_memory",
    "give_word",
    "helper_env",
    "imports_without_gc",
    "lower_priority",
    "pidfd",
    "process",
    "spawn_interruptible",
    "wait_child",
    "word_pipe",
]
