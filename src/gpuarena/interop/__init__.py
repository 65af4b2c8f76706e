"""Other benchmarks' formats, read and written: FlashInfer-Bench's FlashInfer-Trace, and
KernelBench's problem and solution files and GPU MODE's problem folders and submissions (read).

- `flashinfer_trace`: the Definition, Workload, Solution and Trace documents read and
  written, with errors that name the file, the line and the field; the pydantic models are
  `flashinfer_models`' (re-exported by `flashinfer_trace`).
- `flashinfer_import`: a Definition and its workloads as a gpuarena problem folder; a
  FlashInfer Solution as a gpuarena solution folder; and back (`export_definition`). The
  problem's files are made by `flashinfer_problem`; the sidecars it leaves, and the names and
  formats it writes, are `flashinfer_sidecar`'s; `flashinfer_reader` reads such a solution
  folder back under the name it was imported with.
- `flashinfer_export`: gpuarena Evaluation records as Trace lines; a gpuarena solution as a
  FlashInfer Solution (`pack_solution`).
- `kernelbench`: KernelBench problem files (Model, get_inputs, get_init_inputs) as checked
  gpuarena problem folders; the module docstring gives how module state is made once. A file
  is read, run and probed by `kernelbench_read`.
- `kernelbench_solution`: the adapter that lets a KernelBench `ModelNew` file run unmodified as
  a solution (its reader adds it: solutions/readers.py).
- `gpumode`: GPU MODE problem folders (task.yml, reference.py, task.py) as checked gpuarena
  problem folders; the module docstring gives how seeds, data, outputs and checking map. It
  reads the folder with `gpumode_task`, probes the reference with `gpumode_probe` and writes
  the problem with `gpumode_write`.
- `gpumode_solution`: the adapter that lets a GPU MODE submission (`custom_kernel(data)`) run
  unmodified as a solution (its reader adds it: solutions/readers.py).
"""
