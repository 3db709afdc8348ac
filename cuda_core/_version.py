# major.minor: the NVIDIA cuda.core release whose API cuda_core implements (code that gates on
# cuda.core.__version__ takes that release's path); the patch number is cuda_core's own.
__version__ = "1.3.0"
