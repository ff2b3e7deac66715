"""GPU benchmarks of the hot-kernels extension."""
