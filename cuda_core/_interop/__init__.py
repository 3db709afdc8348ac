"""Interop: strided views of other libraries' arrays (StridedMemoryView), DLPack, the CUDA and
NumPy array interfaces, and graphics (OpenGL) resources."""

__all__: list[str] = []  # private package
