"""The evaluation suite: a framework's own implementation of each problem, timed on a device and
scored against a baseline device's results (docs/suite.md)."""
