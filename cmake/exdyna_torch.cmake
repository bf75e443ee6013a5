# The interpreter with torch, and (in the Python-only build) libtorch taken from that torch.
include_guard(GLOBAL)
#
# exdyna_find_torch_python(): sets the cache entry Python3_EXECUTABLE to an interpreter that can
# import torch, unless it is set already (scikit-build-core passes the one running pip; -D picks
# one). A PATH python3 from pyenv or a venv often has no torch, so /usr/bin/python3 is tried too.
# Sets EXDYNA_TORCH_PY_VERSION (torch.__version__), EXDYNA_TORCH_PY_CMAKE (its
# torch.utils.cmake_prefix_path) and EXDYNA_TORCH_PY_DIR (the torch package folder), empty when
# no interpreter with torch is found.
function(exdyna_find_torch_python)
  if(NOT Python3_EXECUTABLE AND Python_EXECUTABLE)
    set(Python3_EXECUTABLE "${Python_EXECUTABLE}" CACHE FILEPATH "Python interpreter with torch")
  endif()
  if(NOT Python3_EXECUTABLE)
    find_program(_exdyna_path_python python3)
    foreach(candidate ${_exdyna_path_python} /usr/bin/python3)
      if(EXISTS ${candidate})
        execute_process(COMMAND ${candidate} -c "import torch" RESULT_VARIABLE rc OUTPUT_QUIET
                        ERROR_QUIET)
        if(rc EQUAL 0)
          set(Python3_EXECUTABLE ${candidate} CACHE FILEPATH "Python interpreter with torch")
          break()
        endif()
      endif()
    endforeach()
  endif()
  set(version "")
  set(cmake_dir "")
  set(torch_dir "")
  if(Python3_EXECUTABLE)
    # One line each: version, cmake prefix path, package folder.
    execute_process(
      COMMAND ${Python3_EXECUTABLE} -c
              "import os, torch, torch.utils; print(torch.__version__); print(torch.utils.cmake_prefix_path); print(os.path.dirname(torch.__file__))"
      OUTPUT_VARIABLE out OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE rc ERROR_VARIABLE err)
    if(rc EQUAL 0)
      string(REPLACE "\n" ";" lines "${out}")
      list(GET lines 0 version)
      list(GET lines 1 cmake_dir)
      list(GET lines 2 torch_dir)
    else()
      set(EXDYNA_TORCH_PY_ERROR "${Python3_EXECUTABLE} cannot import torch: ${err}" PARENT_SCOPE)
    endif()
  endif()
  set(EXDYNA_TORCH_PY_VERSION "${version}" PARENT_SCOPE)
  set(EXDYNA_TORCH_PY_CMAKE "${cmake_dir}" PARENT_SCOPE)
  set(EXDYNA_TORCH_PY_DIR "${torch_dir}" PARENT_SCOPE)
endfunction()

# exdyna_find_package_torch(): find_package(Torch QUIET), leaving the CUDA settings as they were.
# A CUDA torch's Caffe2 files append torch's own nvcc flags to CMAKE_CUDA_FLAGS (a -gencode for
# every architecture torch was built for, sm_50 included, which nvcc 13 refuses) and unset
# CMAKE_CUDA_ARCHITECTURES: settings for compiling torch's CUDA sources. We compile none; our
# kernels take their architectures from cmake/exdyna_cuda.cmake. A macro: Torch_FOUND,
# TORCH_LIBRARIES and the rest stay in the caller's scope.
macro(exdyna_find_package_torch)
  set(_exdyna_cuda_flags "${CMAKE_CUDA_FLAGS}")
  set(_exdyna_cuda_arch_defined OFF)
  if(DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(_exdyna_cuda_arch_defined ON)
    set(_exdyna_cuda_arch "${CMAKE_CUDA_ARCHITECTURES}")
  endif()
  # Unless TORCH_CUDA_ARCH_LIST names them, those files detect the installed GPUs by building and
  # running a .cu file, a test project that inherits our CUDA_STANDARD 20, which CMake 3.25 cannot
  # give nvcc 13 ("requires the language dialect CUDA20"): configure failed, GPU or not. The flags
  # are thrown away below, so any list will do.
  set(_exdyna_torch_arch_set OFF)
  if(NOT DEFINED TORCH_CUDA_ARCH_LIST AND NOT DEFINED ENV{TORCH_CUDA_ARCH_LIST})
    set(TORCH_CUDA_ARCH_LIST 9.0)
    set(_exdyna_torch_arch_set ON)
  endif()
  find_package(Torch QUIET)
  if(_exdyna_torch_arch_set)
    unset(TORCH_CUDA_ARCH_LIST)
  endif()
  set(CMAKE_CUDA_FLAGS "${_exdyna_cuda_flags}")
  if(_exdyna_cuda_arch_defined)
    set(CMAKE_CUDA_ARCHITECTURES "${_exdyna_cuda_arch}")
  else()
    unset(CMAKE_CUDA_ARCHITECTURES)
  endif()
endmacro()

# The Python-only build: libtorch is the interpreter's torch (a pip wheel's share/cmake, or
# Debian's libtorch-dev when python3-torch has no CMake files of its own). Missing torch stops
# configure: the package is nothing without it.
if(EXDYNA_PYTHON_ONLY)
  exdyna_find_torch_python()
  if(NOT EXDYNA_TORCH_PY_VERSION)
    message(FATAL_ERROR "exdyna: the Python package needs torch: no interpreter that imports torch "
                        "(${Python3_EXECUTABLE}) ${EXDYNA_TORCH_PY_ERROR}. Install torch first, "
                        "then `pip install --no-build-isolation .` so that pip builds against it.")
  endif()
  if(EXISTS "${EXDYNA_TORCH_PY_CMAKE}/Torch/TorchConfig.cmake")
    list(PREPEND CMAKE_PREFIX_PATH "${EXDYNA_TORCH_PY_CMAKE}")
    # The wheel's own libraries first: TorchConfig looks for c10 by name with its lib folder as a
    # last resort, so on a machine that also has Debian's libtorch it took /usr/lib's libc10.so
    # (1.13) beside the wheel's libtorch, and the module needed both.
    list(PREPEND CMAKE_PREFIX_PATH "${EXDYNA_TORCH_PY_DIR}")
  endif()
  exdyna_find_package_torch()
  if(NOT Torch_FOUND)
    message(FATAL_ERROR "exdyna: torch ${EXDYNA_TORCH_PY_VERSION} (${EXDYNA_TORCH_PY_DIR}) imports "
                        "but CMake finds no TorchConfig.cmake under ${EXDYNA_TORCH_PY_CMAKE} or "
                        "the system (Debian: install libtorch-dev)")
  endif()
  message(STATUS "exdyna: torch ${EXDYNA_TORCH_PY_VERSION} from ${Python3_EXECUTABLE}, "
                 "libtorch at ${TORCH_INSTALL_PREFIX}")
endif()
