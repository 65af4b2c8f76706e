"""The inside floor: what runs in the untrusted worker's process (its entry point, guards and request loop)."""
