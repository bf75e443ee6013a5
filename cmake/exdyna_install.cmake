# Install rules and the CMake package of the library and its engines. Components:
#   library        core, comm, sparsifiers and the sparsifiers' GPU path: the static archives under
#                  <p>/lib, the public headers under <p>/include/exdyna/..., the package under
#                  <p>/lib/cmake/exdyna
#   mpi            the MPI engine (exdyna::mpi), where it was built
#   gloo           the Gloo engine (exdyna::gloo), where it was built (libtorch and libgloo)
#   process_group  the communicator over a c10d::ProcessGroup (exdyna::process_group), likewise
# so that a C++ project can
#
#   find_package(exdyna 0.1 REQUIRED OPTIONAL_COMPONENTS gloo)
#   target_link_libraries(app PRIVATE exdyna::sparsifiers)   # and exdyna::gloo where found
#   #include <exdyna/exdyna.hpp>
#
# `cmake --install <build>` installs every component; `--component <c>` one of them (an engine
# component needs the library component's package beside it).
#
# The headers: the public ones below and what they include (followed at install time), never the
# internals (the algorithms' passes, the kernels, the engines' own algorithms, test and benchmark
# hooks: tests/install checks). The harness (sim, the engine factory and launcher, train, eval, the
# exdyna command) is not installed: it is the project's own tooling, with dependencies (CLI11,
# nlohmann-json) the library does not have.
# Included from the top-level CMakeLists.txt once the library's and the engines' targets exist.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(EXDYNA_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/exdyna
    CACHE STRING "Where the CMake package of the library goes (relative: under the prefix)")

# Installed names: exdyna::core, exdyna::comm, exdyna::sparsifiers, exdyna::device_path (and
# exdyna::cuda_kernels where CUDA is built). exdyna_warnings is in the export set only because the
# static archives name it as a link-only dependency; it carries no compile flag to a consumer.
set(_exdyna_installed exdyna_warnings exdyna_core exdyna_comm exdyna_sparsifiers exdyna_device_path)
if(TARGET exdyna_cuda_kernels)
  list(APPEND _exdyna_installed exdyna_cuda_kernels)
endif()
foreach(_t IN LISTS _exdyna_installed)
  string(REGEX REPLACE "^exdyna_" "" _name ${_t})
  set_target_properties(${_t} PROPERTIES EXPORT_NAME ${_name})
endforeach()

install(TARGETS ${_exdyna_installed} EXPORT exdynaTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT library
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT library
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

# The public headers, rooted as in the sources; exdyna/exdyna.hpp includes them all. Add a header
# here when it becomes part of the API; one that a public header includes is installed with it.
set(EXDYNA_PUBLIC_HEADERS
    exdyna/exdyna.hpp
    exdyna/core/error.hpp
    exdyna/core/half_float.hpp
    exdyna/comm/communicator.hpp
    exdyna/comm/fingerprint.hpp
    exdyna/comm/local_group.hpp
    exdyna/sparsifiers/config.hpp
    exdyna/sparsifiers/density_warmup.hpp
    exdyna/sparsifiers/device_error_feedback.hpp
    exdyna/sparsifiers/error_feedback.hpp
    exdyna/sparsifiers/factory.hpp
    exdyna/sparsifiers/local_clipping.hpp
    exdyna/sparsifiers/step_clipping.hpp
    exdyna/sparsifiers/momentum_correction.hpp
    exdyna/sparsifiers/option_table.hpp
    exdyna/sparsifiers/registry.hpp
    exdyna/sparsifiers/sparsifier.hpp
    exdyna/sparsifiers/step_stats.hpp
    exdyna/sparsifiers/step_stats_fields.hpp)
# Followed at install time, so that a header a public one starts to include needs no edit here;
# the engines' headers (included by exdyna.hpp only for a program that links the engine) are
# their own components'.
install(CODE "include(\"${CMAKE_CURRENT_LIST_DIR}/exdyna_install_headers.cmake\")
exdyna_install_headers(\"${EXDYNA_SRC}\" \"\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_INCLUDEDIR}\"
                       \"exdyna/comm/engines/\" \"${EXDYNA_PUBLIC_HEADERS}\")"
        COMPONENT library)

# The engines: each its own component, archive, header and export file
# (exdyna-<component>-targets.cmake, loaded by find_package(exdyna COMPONENTS <component>)).
set(EXDYNA_ENGINES_BUILT "")
foreach(_engine mpi gloo process_group)
  if(NOT TARGET exdyna_${_engine})
    continue()
  endif()
  list(APPEND EXDYNA_ENGINES_BUILT ${_engine})
  set_target_properties(exdyna_${_engine} PROPERTIES EXPORT_NAME ${_engine})
  install(TARGETS exdyna_${_engine} EXPORT exdyna_${_engine}
          ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT ${_engine}
          INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
  install(FILES ${EXDYNA_SRC}/exdyna/comm/engines/${_engine}_communicator.hpp
          DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/exdyna/comm/engines COMPONENT ${_engine})
  install(EXPORT exdyna_${_engine} NAMESPACE exdyna:: FILE exdyna-${_engine}-targets.cmake
          DESTINATION ${EXDYNA_INSTALL_CMAKEDIR} COMPONENT ${_engine})
endforeach()

install(EXPORT exdynaTargets NAMESPACE exdyna:: DESTINATION ${EXDYNA_INSTALL_CMAKEDIR}
        COMPONENT library)
# What the package's config records of this build (exdynaConfig.cmake.in): the engines built, the
# Torch package and the Gloo library the gloo and process_group components were linked against.
set(EXDYNA_CONFIG_TORCH_DIR "${Torch_DIR}")
set(EXDYNA_CONFIG_GLOO_LIBRARY "${GLOO_LIBRARY}")
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/exdynaConfig.cmake.in
                              ${CMAKE_CURRENT_BINARY_DIR}/exdynaConfig.cmake
                              INSTALL_DESTINATION ${EXDYNA_INSTALL_CMAKEDIR})
# 0.x: a minor version may change the API, so only the same major.minor is compatible.
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/exdynaConfigVersion.cmake
                                 VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/exdynaConfig.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/exdynaConfigVersion.cmake
        DESTINATION ${EXDYNA_INSTALL_CMAKEDIR} COMPONENT library)
