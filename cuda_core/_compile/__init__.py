"""Compiling: Program (NVRTC, nvJitLink, libNVVM), Linker, ObjectCode and the compile caches."""
