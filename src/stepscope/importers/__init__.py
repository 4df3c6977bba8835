"""Importers: jobs recorded by other tools, written as stepscope job folders.

``stepscope import sagemaker SRC JOB`` (:func:`stepscope.importers.sagemaker.import_job`)
reads a SageMaker Debugger/Profiler output (the predecessor's layout, docs/sagemaker.md)
and writes a job folder through :mod:`stepscope.jobfolder` and :mod:`stepscope.store`,
as the agent and the sampler would. Importers write; they read nothing of stepscope's
own readers, so the reader, the rules and the report see an imported job as any other.
"""
