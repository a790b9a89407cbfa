"""Tools around the runtime, not part of it: the CLI, the benchmark, the memory report.

``python -m mnnpy`` and the ``mnnpy`` console script run :func:`mnnpy.tooling.cli.main`;
``python -m mnnpy bench`` is :mod:`mnnpy.tooling.benchmark` (its workers:
:mod:`mnnpy.tooling.bench_worker`; ``--variants``: :mod:`mnnpy.tooling.bench_variants`);
``python -m mnnpy mem`` draws :mod:`mnnpy.tooling.memory_report`. Nothing in the runtime imports
this package.
"""
