// The exdyna library's public C++ API, one header: #include <exdyna/exdyna.hpp>.
//
//   exdyna::sparsifiers  the sparsifiers by name (Registry, builtin_registry, make_error_feedback),
//                        their options (SparsifierConfig, the option table to set them by name),
//                        error feedback on host memory (ErrorFeedback, with the convergence
//                        mechanisms: MomentumCorrection, clip_locally, warmup_density) and on
//                        device memory (make_device_error_feedback, where the library was built
//                        with CUDA), and the statistics of a step (StepStats, its named fields)
//   exdyna::comm         the Communicator interface every engine implements, the in-process group
//                        (LocalGroup, run_local), the start-up check that every rank runs the same
//                        configuration (check_same_configuration), and the engines the program
//                        links (below)
//   exdyna               the errors (Error and its subclasses)
//
// Engines: each is an installed component of its own (find_package(exdyna COMPONENTS gloo)), and
// its target defines EXDYNA_HAS_<ENGINE> for whoever links it, so this header declares exactly the
// engines a program links. (Not whether their header files are present: an engine installed but
// not linked would declare functions that do not link, and the process-group engine's header pulls
// in libtorch's, which a program without libtorch's include path cannot compile.)
//   EXDYNA_HAS_GLOO           exdyna::gloo           make_gloo_communicator(GlooConfig::from_env())
//   EXDYNA_HAS_MPI            exdyna::mpi            make_mpi_communicator(timeout), under mpirun
//   EXDYNA_HAS_PROCESS_GROUP  exdyna::process_group  ProcessGroupCommunicator over a c10d group
//
// Everything else under exdyna/ in the source tree is the library's inside and is not installed.
#pragma once

#include "exdyna/comm/communicator.hpp"
#include "exdyna/comm/fingerprint.hpp"
#include "exdyna/comm/local_group.hpp"
#include "exdyna/core/error.hpp"
#include "exdyna/core/half_float.hpp"
#include "exdyna/sparsifiers/config.hpp"
#include "exdyna/sparsifiers/density_warmup.hpp"
#include "exdyna/sparsifiers/device_error_feedback.hpp"
#include "exdyna/sparsifiers/error_feedback.hpp"
#include "exdyna/sparsifiers/factory.hpp"
#include "exdyna/sparsifiers/local_clipping.hpp"
#include "exdyna/sparsifiers/momentum_correction.hpp"
#include "exdyna/sparsifiers/option_table.hpp"
#include "exdyna/sparsifiers/registry.hpp"
#include "exdyna/sparsifiers/sparsifier.hpp"
#include "exdyna/sparsifiers/step_clipping.hpp"
#include "exdyna/sparsifiers/step_stats.hpp"
#include "exdyna/sparsifiers/step_stats_fields.hpp"

#ifdef EXDYNA_HAS_GLOO
#include "exdyna/comm/engines/gloo_communicator.hpp"
#endif
#ifdef EXDYNA_HAS_MPI
#include "exdyna/comm/engines/mpi_communicator.hpp"
#endif
#ifdef EXDYNA_HAS_PROCESS_GROUP
#include "exdyna/comm/engines/process_group_communicator.hpp"
#endif
