"""Other benchmarks' formats, read and written: FlashInfer-Bench's FlashInfer-Trace.

- `flashinfer_trace`: the Definition, Workload, Solution and Trace documents as pydantic
  models, and readers whose errors name the file, the line and the field.
- `flashinfer_import`: a Definition and its workloads as a gpuarena problem folder; a
  FlashInfer Solution as a gpuarena solution folder; and back (`export_definition`).
- `flashinfer_export`: gpuarena Evaluation records as Trace lines; a gpuarena solution as a
  FlashInfer Solution (`pack_solution`).
"""
