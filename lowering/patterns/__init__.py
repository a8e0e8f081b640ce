"""The rewrite mechanism: `@lowers` functions as rewrite patterns (`framework`), the entry
function's boundary (`boundary`), tuple values (`tuples`) and sub-computations emitted as
scalar code (`computations`). Imports `dialect` and `lowering.scalar`, never `lowering.ops`.
"""
