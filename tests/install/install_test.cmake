# The installed library, as a user gets it: `cmake --install` of the library component into an
# empty prefix, its headers checked, then examples/cpp configured (find_package(exdyna)), built
# and run against that prefix alone. Run by CTest (test `install`) as
#   cmake -DBUILD_DIR=... -DWORK_DIR=... -DCONSUMER_DIR=... -DGENERATOR=... -DCXX=...
#         [-DCUDA_ROOT=...] -P install_test.cmake
cmake_minimum_required(VERSION 3.25)
foreach(v BUILD_DIR WORK_DIR CONSUMER_DIR GENERATOR CXX)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "install_test.cmake: ${v} is not set")
  endif()
endforeach()

function(run_step what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  message(STATUS "${what}:\n${out}${err}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "install test: ${what} failed (${rc})")
  endif()
endfunction()

# The headers of the library component: the front door and what it includes; none of the
# internals nor of the harness; no test or benchmark hook.
function(check_headers include_dir)
  foreach(h exdyna/exdyna.hpp exdyna/sparsifiers/factory.hpp exdyna/comm/local_group.hpp)
    if(NOT EXISTS ${include_dir}/${h})
      message(FATAL_ERROR "install test: no ${h} under ${include_dir}")
    endif()
  endforeach()
  file(GLOB_RECURSE headers RELATIVE ${include_dir} ${include_dir}/*)
  string(REPLACE ";" "\n  " listing "${headers}")
  message(STATUS "installed headers:\n  ${listing}")
  set(internal "ladder_wire|ladder_cut|fused_gather|device_rules|device_kernels|device_workspace"
               "device_step|cuda_[a-z_]*|partition|selection|threshold|topk_select|scratch_buffer"
               "huge_pages|job_token|byte_io|sha256|hash|[a-z_]*_testing")
  string(JOIN "|" internal ${internal})
  set(hook "[Bb]ench|[Tt]esting|[Ff]or (the )?tests|tests/|test hook")
  foreach(h IN LISTS headers)
    if(h MATCHES "^exdyna/(comm/engines|sim|train|eval|apps)/")
      message(FATAL_ERROR "install test: ${h} (the engines' or the harness's) was installed")
    endif()
    get_filename_component(name ${h} NAME)
    if(name MATCHES "^(${internal})\\.(hpp|cuh)$")
      message(FATAL_ERROR "install test: the internal header ${h} was installed")
    endif()
    file(STRINGS ${include_dir}/${h} lines REGEX "${hook}")
    if(lines)
      message(FATAL_ERROR "install test: ${h} mentions tests or benchmarks: ${lines}")
    endif()
  endforeach()
endfunction()

file(REMOVE_RECURSE ${WORK_DIR})
set(prefix ${WORK_DIR}/prefix)
run_step("install" ${CMAKE_COMMAND} --install ${BUILD_DIR} --component library --prefix ${prefix})
check_headers(${prefix}/include)
set(cuda_args)
if(CUDA_ROOT)
  set(cuda_args -DCUDAToolkit_ROOT=${CUDA_ROOT})
endif()
run_step("configure the consumer" ${CMAKE_COMMAND} -S ${CONSUMER_DIR} -B ${WORK_DIR}/consumer
         -G ${GENERATOR} -DCMAKE_CXX_COMPILER=${CXX} -DCMAKE_BUILD_TYPE=Release
         -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF ${cuda_args})
run_step("build the consumer" ${CMAKE_COMMAND} --build ${WORK_DIR}/consumer)
find_program(consumer exdyna_consumer PATHS ${WORK_DIR}/consumer NO_DEFAULT_PATH REQUIRED)
run_step("run the consumer" ${consumer})
file(REMOVE_RECURSE ${WORK_DIR})
