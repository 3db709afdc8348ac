"""Compiling: Program (NVRTC, nvJitLink, libNVVM), Linker, ObjectCode and the compile caches."""

__all__: list[str] = []  # private package
