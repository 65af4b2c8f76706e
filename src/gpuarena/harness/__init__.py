"""The harness: a trusted supervisor, an untrusted worker, checks, timing and statistics."""
