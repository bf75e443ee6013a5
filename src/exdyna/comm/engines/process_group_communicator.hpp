// A Communicator over a c10d::ProcessGroup that somebody else created and rendezvoused: the one a
// PyTorch user already has (torch.distributed's default group, or the group DDP uses), handed
// over from Python by the binding (python/bindings.cpp). No second rendezvous, no store
// of our own: every collective is a call on the group, so it shares the group's connections and its
// ordering with the user's own collectives.
//
//   all-reduce          ProcessGroup::allreduce (SUM), in place
//   allgather_counts    ProcessGroup::allgather of equal-size int64 tensors
//   padded all-gather   ProcessGroup::allgather of max(counts)-element byte tensors: the padding
//                       really travels, as the paper's padded all-gather
//   exact all-gather    one ProcessGroup::broadcast per rank with a non-empty list, each of that
//                       rank's true size: c10d's allgather insists on equal sizes, and a generic
//                       group offers no allgatherv, so n broadcasts move exactly the payload
//   broadcast, barrier  ProcessGroup::broadcast / barrier
//
// Every call waits with the communicator's timeout. After a failure the communicator refuses
// further calls (a collective may still be in flight on the group), naming the first failure.
// Host buffers become CPU tensors over the caller's memory (from_blob) for Gloo and MPI; over NCCL,
// which moves only device memory, they travel through a copy on the current CUDA device. Device
// buffers (allgather_list_device, allreduce_sum_device: the GPU path) become CUDA tensors over
// the caller's device memory, for NCCL or Gloo (which takes CUDA tensors); MPI refuses them.
//
// This header includes libtorch's c10d headers: only the Python binding and this engine's .cpp
// include it.
#pragma once

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include <chrono>
#include <memory>

#include "exdyna/comm/communicator.hpp"

namespace exdyna::comm {

// Throws InvalidArgument when pg is null or its backend is not gloo, mpi or nccl.
std::unique_ptr<Communicator> make_process_group_communicator(
    c10::intrusive_ptr<c10d::ProcessGroup> pg,
    std::chrono::milliseconds timeout = std::chrono::milliseconds(300'000));

}  // namespace exdyna::comm
