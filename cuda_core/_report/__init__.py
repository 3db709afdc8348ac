"""The environment report of ``python -m cuda_core`` and :func:`cuda_core.show_config`."""

__all__: list[str] = []  # private package
