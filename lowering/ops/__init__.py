"""One module per op family: `@lowers("op")` functions from xhlo ops to linalg/tensor/scf/arith.

Importing this package registers every lowering (`patterns.framework.LOWERINGS`).
Op modules import `dialect`, `lowering.scalar`, `lowering.patterns` and each other.
"""

from . import (  # noqa: F401  (registration side effects)
    collective,
    control,
    convolution,
    core,
    custom,
    dot,
    dot_variants,
    dynamic,
    elementwise,
    fft,
    indexing,
    io,
    linear_algebra,
    reduce,
    rng,
    scan,
    shape_ops,
    sort,
)
