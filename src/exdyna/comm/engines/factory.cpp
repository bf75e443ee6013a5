#include "exdyna/comm/engines/factory.hpp"

#include <cstdlib>

#include "exdyna/core/enum_names.hpp"

#ifdef EXDYNA_HAVE_MPI
#include "exdyna/comm/engines/mpi_communicator.hpp"
#endif
#ifdef EXDYNA_HAVE_GLOO
#include "exdyna/comm/engines/gloo_communicator.hpp"
#endif

namespace exdyna::comm {

constexpr core::EnumNames<Backend, 4> kBackendNames{{{Backend::kAuto, "auto"},
                                                     {Backend::kMpi, "mpi"},
                                                     {Backend::kGloo, "gloo"},
                                                     {Backend::kLocal, "local"}}};
constexpr core::EnumNames<Plan, 4> kPlanNames{{{Plan::kConnectMpi, "mpi"},
                                               {Plan::kConnectGloo, "gloo"},
                                               {Plan::kLaunch, "launch"},
                                               {Plan::kInProcess, "local"}}};

const char* to_string(Backend b) {
  return core::enum_to_string(kBackendNames, b);
}

Backend parse_backend(std::string_view s) {
  return core::enum_parse(kBackendNames, "backend", s);
}

const char* to_string(Plan p) {
  return core::enum_to_string(kPlanNames, p);
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

namespace {
bool env_set(const char* name) {
  const char* v = std::getenv(name);
  return v && *v;
}
int env_int_or(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return (v && *v) ? std::atoi(v) : fallback;
}
}  // namespace

bool in_mpi_environment() {
  return env_set("OMPI_COMM_WORLD_SIZE") || env_set("PMI_SIZE") || env_set("PMIX_RANK");
}

bool in_torchrun_environment() {
  return env_set("RANK") && env_set("WORLD_SIZE");
}

bool in_launched_environment() {
  return in_mpi_environment() || in_torchrun_environment();
}

Plan plan_engine(Backend requested, int workers) {
  EXDYNA_CHECK_ARG(workers >= 1, "--workers ", workers, " is not valid; expected >= 1");
  auto need_gloo = [] {
    EXDYNA_CHECK_ARG(have_gloo(),
                     "this exdyna was built without the Gloo engine (EXDYNA_WITH_TORCH=OFF); "
                     "use --backend mpi under mpirun, or --backend local");
  };
  auto check_world = [workers](int world, const char* var) {
    // --workers defaults to the world size; a different explicit value is a mistake worth naming.
    EXDYNA_CHECK_ARG(workers == 1 || workers == world, "--workers ", workers, " disagrees with ",
                     var, "=", world, "; under a launcher the world size comes from the launcher");
  };
  switch (requested) {
    case Backend::kLocal:
      return Plan::kInProcess;
    case Backend::kMpi:
      EXDYNA_CHECK_ARG(have_mpi(),
                       "this exdyna was built without the MPI engine (EXDYNA_WITH_MPI=OFF)");
      if (in_mpi_environment()) {
        check_world(env_int_or("OMPI_COMM_WORLD_SIZE", env_int_or("PMI_SIZE", workers)),
                    "the mpirun world size");
        return Plan::kConnectMpi;
      }
      EXDYNA_CHECK_ARG(workers == 1, "--backend mpi with --workers ", workers,
                       " needs mpirun: mpirun -np ", workers, " exdyna ... --backend mpi");
      return Plan::kConnectMpi;  // an MPI singleton
    case Backend::kGloo:
      need_gloo();
      if (in_torchrun_environment()) {
        check_world(env_int_or("WORLD_SIZE", workers), "WORLD_SIZE");
        return Plan::kConnectGloo;
      }
      return Plan::kLaunch;
    case Backend::kAuto:
      if (in_mpi_environment() && have_mpi()) return plan_engine(Backend::kMpi, workers);
      if (in_torchrun_environment()) return plan_engine(Backend::kGloo, workers);
      if (workers == 1) return Plan::kInProcess;
      need_gloo();
      return Plan::kLaunch;
  }
  return Plan::kInProcess;
}

std::unique_ptr<Communicator> make_communicator(Plan plan, const EngineOptions& opt) {
  EXDYNA_CHECK_ARG(opt.timeout.count() > 0, "timeout ", opt.timeout.count(),
                   " ms is not valid; expected > 0");
  switch (plan) {
    case Plan::kConnectMpi:
#ifdef EXDYNA_HAVE_MPI
      return make_mpi_communicator(opt.timeout);
#else
      throw InvalidArgument("this exdyna was built without the MPI engine (EXDYNA_WITH_MPI=OFF)");
#endif
    case Plan::kConnectGloo: {
#ifdef EXDYNA_HAVE_GLOO
      auto cfg = GlooConfig::from_env();
      cfg.timeout = opt.timeout;
      if (!opt.listen_addr.empty()) cfg.listen_addr = opt.listen_addr;
      return make_gloo_communicator(cfg);
#else
      throw InvalidArgument(
          "this exdyna was built without the Gloo engine (EXDYNA_WITH_TORCH=OFF)");
#endif
    }
    case Plan::kLaunch:
    case Plan::kInProcess:
      break;
  }
  throw InvalidArgument(
      detail::concat("make_communicator: plan '", to_string(plan),
                     "' has no single-process engine; use the launcher or LocalGroup"));
}

}  // namespace exdyna::comm
