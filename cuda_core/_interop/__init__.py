"""Interop: strided views of other libraries' arrays (StridedMemoryView), DLPack, the CUDA and
NumPy array interfaces, graphics (OpenGL) resources, and external memory and semaphores
(imported from file descriptors another API exported)."""

__all__: list[str] = []  # private package
