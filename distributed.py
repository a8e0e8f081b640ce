"""`xm.distributed`: replicas across processes, one per MPI rank (the optional `mpi` extra).

The public face of `runtime.replicas.mpi` (see there): run a script under
`mpiexec -n N` and call `xm.distributed.initialize()`.
"""

from .runtime.replicas.mpi import (
    MpiCommunicator,
    abort,
    context,
    initialize,
    is_initialized,
    num_replicas,
    replica_id,
    shutdown,
    under_mpiexec,
)

__all__ = ["MpiCommunicator", "abort", "context", "initialize", "is_initialized", "num_replicas",
           "replica_id",
           "shutdown", "under_mpiexec"]
