# The CUDA kernels of core/device_kernels.hpp and sparsifiers/exdyna/device_kernels.hpp (the .cu
# files beside their CPU counterparts in src/exdyna/core and src/exdyna/sparsifiers/exdyna), their
# GPU self-check and their benchmark. Included from the top-level CMakeLists.txt after
# exdyna_sparsifiers is defined; needs nothing but the CUDA toolkit (nvcc, cudart, CCCL's cub) and
# the library (no gtest, MPI, torch or JSON library).
#
#   EXDYNA_CUDA=AUTO (default): built where check_language(CUDA) finds nvcc; ON: required; OFF: not.
#
# Sets EXDYNA_CUDA_BUILT (ON/OFF) for the rest of the build. Targets when ON:
#   exdyna_cuda_kernels  static PIC library (links exdyna_sparsifiers and the CUDA runtime)
#   exdyna_cuda_check    the device functions against the CPU ones on the same data (exit 0: all
#                        equal, 1: a mismatch, printed; 77: no CUDA device)
#   exdyna_cuda_bench    timings as JSON (stdout, or the file named by argv[1]); 77: no device
set(EXDYNA_CUDA AUTO CACHE STRING "Build the CUDA kernels: AUTO (where nvcc is found), ON, OFF")
set_property(CACHE EXDYNA_CUDA PROPERTY STRINGS AUTO ON OFF)

set(EXDYNA_CUDA_BUILT OFF)
string(TOUPPER "${EXDYNA_CUDA}" _exdyna_cuda_mode)
if(NOT _exdyna_cuda_mode STREQUAL "OFF")
  include(CheckLanguage)
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc AND NOT DEFINED ENV{CUDACXX})
    # nvcc off PATH in its usual place (check_language looks on PATH and at CUDACXX only).
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc CACHE FILEPATH "CUDA compiler")
  endif()
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    set(EXDYNA_CUDA_BUILT ON)
  elseif(_exdyna_cuda_mode STREQUAL "ON")
    message(FATAL_ERROR "EXDYNA_CUDA=ON but no CUDA compiler was found (set CUDACXX or "
                        "CMAKE_CUDA_COMPILER to nvcc)")
  else()
    message(STATUS "exdyna: CUDA kernels skipped: no CUDA compiler found (EXDYNA_CUDA=AUTO)")
  endif()
endif()

if(EXDYNA_CUDA_BUILT)
  get_filename_component(_exdyna_root ${CMAKE_CURRENT_LIST_DIR}/.. ABSOLUTE)
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES 90)
  endif()
  enable_language(CUDA)
  find_package(CUDAToolkit REQUIRED)
  # C++20 (core's headers use std::span; CUDA targets also inherit CXX_STANDARD 20 when
  # CUDA_STANDARD is unset). CMake 3.25 does not know nvcc 13's C++20 flag ("requires the language
  # dialect CUDA20"): teach it, where it does not know it already.
  if(NOT CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
    set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
    set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
    set(CMAKE_CUDA20_COMPILE_FEATURES cuda_std_20)
    list(APPEND CMAKE_CUDA_COMPILE_FEATURES cuda_std_20)
  endif()
  set(CMAKE_CUDA_STANDARD 20)
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
  set(CMAKE_CUDA_EXTENSIONS OFF)

  file(GLOB EXDYNA_CUDA_SRC CONFIGURE_DEPENDS ${_exdyna_root}/src/exdyna/core/*.cu
       ${_exdyna_root}/src/exdyna/sparsifiers/exdyna/*.cu)
  add_library(exdyna_cuda_kernels STATIC ${EXDYNA_CUDA_SRC})
  set_target_properties(exdyna_cuda_kernels PROPERTIES POSITION_INDEPENDENT_CODE ON
                                                       CUDA_SEPARABLE_COMPILATION OFF)
  target_link_libraries(exdyna_cuda_kernels PUBLIC exdyna_sparsifiers CUDA::cudart_static)
  target_compile_options(exdyna_cuda_kernels PRIVATE
                         $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall>)
  target_compile_definitions(exdyna_cuda_kernels PUBLIC EXDYNA_CUDA_BUILT=1)

  # The GPU self-check and the benchmark: plain C++ mains over the kernels and the CPU code.
  add_executable(exdyna_cuda_check ${_exdyna_root}/tests/gpu/cuda_check.cpp)
  target_link_libraries(exdyna_cuda_check PRIVATE exdyna_cuda_kernels)
  add_executable(exdyna_cuda_bench ${_exdyna_root}/bench/cuda/cuda_bench.cpp)
  target_link_libraries(exdyna_cuda_bench PRIVATE exdyna_cuda_kernels CUDA::cudart_static)
  foreach(_t exdyna_cuda_check exdyna_cuda_bench)
    if(TARGET exdyna_warnings)
      target_link_libraries(${_t} PRIVATE exdyna_warnings)
    endif()
  endforeach()

  # CTest: the self-check (label gpu); exit 77 (no device, as on CI) reads as skipped.
  enable_testing()
  add_test(NAME cuda_check COMMAND exdyna_cuda_check)
  set_tests_properties(cuda_check PROPERTIES SKIP_RETURN_CODE 77 LABELS gpu TIMEOUT 1800)
  add_test(NAME cuda_check_help COMMAND exdyna_cuda_check --help)
  set_tests_properties(cuda_check_help PROPERTIES LABELS gpu)

  message(STATUS "exdyna: CUDA kernels built (nvcc ${CMAKE_CUDA_COMPILER_VERSION}, architectures "
                 "${CMAKE_CUDA_ARCHITECTURES}): exdyna_cuda_kernels, exdyna_cuda_check, "
                 "exdyna_cuda_bench")
endif()
