// Picks and builds the communication engine for this process. The only place that knows which
// engines were compiled in.
#pragma once

#include <chrono>
#include <memory>
#include <string_view>

#include "exdyna/comm/communicator.hpp"

namespace exdyna::comm {

enum class Backend { kAuto, kMpi, kGloo, kLocal };
const char* to_string(Backend b);
Backend parse_backend(std::string_view s);  // auto | mpi | gloo | local

// Which engines this build has.
bool have_mpi();
bool have_gloo();

}  // namespace exdyna::comm
