// The MPI engine: the Communicator over the MPI C API (OpenMPI), one process per rank, started by
// mpirun on one host or many. MPI's blocking collectives have no timeout, so every collective is
// issued non-blocking (MPI_Iallgather, MPI_Iallgatherv, MPI_Iallreduce, MPI_Ibcast, MPI_Ibarrier)
// and completed by MPI_Test polling against a deadline. On a timeout or an MPI error the call
// throws (TimeoutError / CommError naming the operation); the communicator is then unusable, and
// its destructor calls MPI_Abort so every rank of the job exits non-zero instead of hanging in
// MPI_Finalize with a request still posted.
//
// This header is MPI-free so the factory and the apps do not need MPI's include path.
#pragma once

#include <memory>

#include "exdyna/comm/communicator.hpp"

namespace exdyna::comm {

// Initialises MPI if nobody has (MPI_Init_thread, FUNNELED) and duplicates MPI_COMM_WORLD. Only
// one MPI communicator per process.
std::unique_ptr<Communicator> make_mpi_communicator(std::chrono::milliseconds timeout);

}  // namespace exdyna::comm
