"""The pipeline's own passes, each a Python callable `(op, pass_) -> None` that
`lowering.pipeline` places in a stage: fusion, schedules (transform scripts for
contractions), vectorization, math approximations, destinations, i1 memory, loop state.
Imports `dialect` and `lowering.patterns` at most, never `lowering.ops`.
"""
