"""Every solution reader, registered: import this module (once) before loading a solution.

solutions/ reads its own format and asks the readers registered with solutions/readers.py for
the others; the features that know those formats register their readers in their own modules,
which this module imports. It sits above both, so that solutions/ never imports a feature:
the CLI's commands that load solutions and the service's uploads import it (the runner and the
harness's worker never load a solution from a file: they receive it whole).
"""

from gpuarena.interop import flashinfer_reader, gpumode_solution, kernelbench_solution
from gpuarena.migration import port_reader

READERS = (kernelbench_solution, gpumode_solution, flashinfer_reader, port_reader)
"""The modules whose readers are registered (solutions/readers.py says the order they are tried in)."""
