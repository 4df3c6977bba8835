"""Process plumbing shared by the launcher and its helper processes.

The sampler and the live rule runner run beside the training command; both must
end when it (or the launcher) ends, and must yield the CPU to it. :mod:`._exitwatch`
sleeps until a watched process exits (pidfd where the kernel has it);
:mod:`._background` lowers a helper's priority.
"""
