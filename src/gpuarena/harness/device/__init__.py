"""The device floor: backends, their timing methods and what reads the GPU's own counters."""
