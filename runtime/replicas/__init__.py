"""Replicas: the runtime side of the collectives, for N threads of one process
(`threads`) or one replica per MPI rank (`mpi`), over one `Communicator` protocol
(`communicators`). `execution` finds the replica a call runs and runs them;
`builtins` are the targets the compiled collectives call. Imports `dialect`, `lowering`.
"""

from .builtins import collective_builtins
from .communicators import COLLECTIVE_TIMEOUT, CollectiveAborted, CollectiveError, ReplicaContext
from .execution import check_collectives, execute_replicated

__all__ = ["COLLECTIVE_TIMEOUT", "CollectiveAborted", "CollectiveError", "ReplicaContext",
           "check_collectives", "collective_builtins", "execute_replicated"]
