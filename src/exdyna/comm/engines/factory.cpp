#include "exdyna/comm/engines/factory.hpp"

namespace exdyna::comm {

const char* to_string(Backend b) {
  switch (b) {
    case Backend::kAuto: return "auto";
    case Backend::kMpi: return "mpi";
    case Backend::kGloo: return "gloo";
    case Backend::kLocal: return "local";
  }
  return "?";
}

Backend parse_backend(std::string_view s) {
  if (s == "auto") return Backend::kAuto;
  if (s == "mpi") return Backend::kMpi;
  if (s == "gloo") return Backend::kGloo;
  if (s == "local") return Backend::kLocal;
  throw InvalidArgument(detail::concat("backend '", s, "' is not valid; expected auto, mpi, gloo or local"));
}

bool have_mpi() {
#ifdef EXDYNA_HAVE_MPI
  return true;
#else
  return false;
#endif
}

bool have_gloo() {
#ifdef EXDYNA_HAVE_GLOO
  return true;
#else
  return false;
#endif
}

}  // namespace exdyna::comm
