"""Implementation of :mod:`stepscope.config`; import the public names from there."""
