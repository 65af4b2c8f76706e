"""The runner: claims jobs for its devices from a server, runs the harness, posts results."""
