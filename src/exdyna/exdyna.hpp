// The exdyna library's public C++ API, one header: #include <exdyna/exdyna.hpp>.
//
//   exdyna::sparsifiers  the sparsifiers by name (Registry, builtin_registry, make_error_feedback),
//                        their options (SparsifierConfig, the option table to set them by name),
//                        error feedback on host memory (ErrorFeedback) and on device memory
//                        (make_device_error_feedback, where the library was built with CUDA), and
//                        the statistics of a step (StepStats, its named fields)
//   exdyna::comm         the Communicator interface every engine implements, the in-process group
//                        (LocalGroup, run_local), the start-up check that every rank runs the same
//                        configuration (check_same_configuration)
//   exdyna               the errors (Error and its subclasses)
//
// Everything else under exdyna/ in the source tree is the library's inside and is not installed.
#pragma once

#include "exdyna/comm/communicator.hpp"
#include "exdyna/comm/fingerprint.hpp"
#include "exdyna/comm/local_group.hpp"
#include "exdyna/core/error.hpp"
#include "exdyna/core/half_float.hpp"
#include "exdyna/sparsifiers/config.hpp"
#include "exdyna/sparsifiers/device_error_feedback.hpp"
#include "exdyna/sparsifiers/error_feedback.hpp"
#include "exdyna/sparsifiers/factory.hpp"
#include "exdyna/sparsifiers/option_table.hpp"
#include "exdyna/sparsifiers/registry.hpp"
#include "exdyna/sparsifiers/sparsifier.hpp"
#include "exdyna/sparsifiers/step_stats.hpp"
#include "exdyna/sparsifiers/step_stats_fields.hpp"
