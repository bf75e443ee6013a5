# Install rules and the CMake package of the library (core, comm, sparsifiers, and the sparsifiers'
# GPU path): `cmake --install <build> --component library --prefix <p>` puts the static archives
# under <p>/lib, the public headers under <p>/include/exdyna/... and the package under
# <p>/lib/cmake/exdyna, so that a C++ project can
#
#   find_package(exdyna 0.1 REQUIRED)
#   target_link_libraries(app PRIVATE exdyna::sparsifiers)
#
# The harness (sim, engines, train, eval, the exdyna command) is not installed: it is the project's
# own tooling, with dependencies (MPI, libtorch, CLI11, nlohmann-json) the library does not have.
# Included from the top-level CMakeLists.txt once the library's targets exist.
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

# The library's public headers, rooted as in the sources ("exdyna/sparsifiers/factory.hpp"). Not
# comm/engines/ (the harness's MPI and Gloo engines) nor the CUDA-only .cuh of the kernels' sources.
foreach(_dir core comm sparsifiers)
  install(DIRECTORY ${EXDYNA_SRC}/exdyna/${_dir} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/exdyna
          COMPONENT library FILES_MATCHING PATTERN "*.hpp" PATTERN "engines" EXCLUDE)
endforeach()

install(EXPORT exdynaTargets NAMESPACE exdyna:: DESTINATION ${EXDYNA_INSTALL_CMAKEDIR}
        COMPONENT library)
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/exdynaConfig.cmake.in
                              ${CMAKE_CURRENT_BINARY_DIR}/exdynaConfig.cmake
                              INSTALL_DESTINATION ${EXDYNA_INSTALL_CMAKEDIR})
# 0.x: a minor version may change the API, so only the same major.minor is compatible.
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/exdynaConfigVersion.cmake
                                 VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/exdynaConfig.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/exdynaConfigVersion.cmake
        DESTINATION ${EXDYNA_INSTALL_CMAKEDIR} COMPONENT library)
