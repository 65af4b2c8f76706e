"""Profile mode: the solution's kernels under Nsight Compute, read and drawn as a roofline."""
