"""The launch floor: starting, containing, freezing and stopping workers; their cgroup, view and caches."""
