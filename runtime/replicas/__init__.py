"""Replicas: the runtime side of the collectives, for N threads of one process
(`threads`) or one replica per MPI rank (`mpi`), over one `Communicator` protocol
(`communicators`). `execution` finds the replica a call runs and runs them;
`builtins` are the targets the compiled collectives call. Imports `dialect`, `lowering`.
"""

# Seconds a collective waits for its peers. None: XLAMLIR_COLLECTIVE_TIMEOUT as the environment
# holds it when the replicas start (default 60). Both are read then, not at import, so setting
# either after `import xlamlir` takes effect on the next run (`communicators.collective_timeout`).
COLLECTIVE_TIMEOUT: float | None = None

from .builtins import collective_builtins  # noqa: E402  (after the setting it reads)
from .communicators import (  # noqa: E402
    CollectiveAborted,
    CollectiveError,
    ReplicaContext,
    collective_timeout,
    locate,
    located,
)
from .execution import check_collectives, execute_replicated  # noqa: E402
from .threads import ThreadCommunicator  # noqa: E402

__all__ = ["COLLECTIVE_TIMEOUT", "CollectiveAborted", "CollectiveError", "ReplicaContext",
           "ThreadCommunicator", "check_collectives", "collective_builtins", "collective_timeout",
           "execute_replicated", "locate", "located"]
