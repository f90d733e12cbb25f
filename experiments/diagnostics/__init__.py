"""Is a machine running attnlab right: gpu_check, flex_check and the kernel comparison."""
