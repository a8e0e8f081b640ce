"""`xlamlir.lowering.schedules`, the name users import (README): the very module
`lowering.passes.schedules`, so `schedules.STRICT = True` or `schedules.last_script()`
act on the one the pipeline runs (a module of re-exports would hold copies)."""

import sys

from .passes import schedules

sys.modules[__name__] = schedules
