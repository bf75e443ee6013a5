# The installed library, as a user gets it: `cmake --install` of the library component into an
# empty prefix, its headers checked, then the engine components that were built (ENGINES, e.g.
# mpi,gloo,process_group), then examples/cpp configured (find_package(exdyna)), built and run
# against that prefix alone; with gloo, the two-process example on two processes. Run by CTest
# (test `install`) as
#   cmake -DBUILD_DIR=... -DWORK_DIR=... -DCONSUMER_DIR=... -DGENERATOR=... -DCXX=...
#         [-DCUDA_ROOT=...] [-DENGINES=...] -P install_test.cmake
cmake_minimum_required(VERSION 3.25)
foreach(v BUILD_DIR WORK_DIR CONSUMER_DIR GENERATOR CXX)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "install_test.cmake: ${v} is not set")
  endif()
endforeach()
string(REPLACE "," ";" ENGINES "${ENGINES}")

function(run_step what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  message(STATUS "${what}:\n${out}${err}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "install test: ${what} failed (${rc})")
  endif()
endfunction()

# The headers of the library component: the front door and what it includes; none of the
# internals nor of the engines (their own components); no test or benchmark hook.
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

# The digest each rank of exdyna_two_process printed, in `out` (in order of the ranks' lines).
function(digests text out)
  string(REGEX MATCHALL "update digest [0-9a-f]+" found "${text}")
  list(TRANSFORM found REPLACE "update digest " "")
  set(${out} ${found} PARENT_SCOPE)
endfunction()

# Two processes, one rank each, over Gloo on loopback; each rank's output in its own file. A port
# another program took in the meantime is retried on another one.
function(run_two_processes exe out)
  string(RANDOM LENGTH 32 ALPHABET 0123456789abcdef token)
  foreach(attempt 1 2 3)
    string(RANDOM LENGTH 4 ALPHABET 0123456789 r)
    math(EXPR port "20000 + ${r}")
    execute_process(
      COMMAND ${CMAKE_COMMAND} -E env MASTER_ADDR=127.0.0.1 MASTER_PORT=${port} WORLD_SIZE=2
              EXDYNA_JOB_TOKEN=${token} sh -c
              "RANK=0 \"$0\" >\"$1.0\" 2>&1 & p=$!; RANK=1 \"$0\" >\"$1.1\" 2>&1; s=$?; wait $p || s=1; exit $s"
              ${exe} ${WORK_DIR}/rank
      RESULT_VARIABLE rc TIMEOUT 180)
    file(READ ${WORK_DIR}/rank.0 r0)
    file(READ ${WORK_DIR}/rank.1 r1)
    message(STATUS "two processes over Gloo (port ${port}):\n${r0}${r1}")
    if(rc EQUAL 0)
      set(${out} "${r0}${r1}" PARENT_SCOPE)
      return()
    elseif(NOT "${r0}${r1}" MATCHES "[Aa]ddress already in use|EADDRINUSE")
      break()
    endif()
  endforeach()
  message(FATAL_ERROR "install test: the two-process example failed (${rc})")
endfunction()

file(REMOVE_RECURSE ${WORK_DIR})
set(prefix ${WORK_DIR}/prefix)
run_step("install" ${CMAKE_COMMAND} --install ${BUILD_DIR} --component library --prefix ${prefix})
check_headers(${prefix}/include)
foreach(engine IN LISTS ENGINES)
  run_step("install ${engine}" ${CMAKE_COMMAND} --install ${BUILD_DIR} --component ${engine}
           --prefix ${prefix})
  if(NOT EXISTS ${prefix}/include/exdyna/comm/engines/${engine}_communicator.hpp)
    message(FATAL_ERROR "install test: the ${engine} component installed no header")
  endif()
endforeach()

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

if("gloo" IN_LIST ENGINES)
  find_program(two exdyna_two_process PATHS ${WORK_DIR}/consumer NO_DEFAULT_PATH)
  if(NOT two)
    message(FATAL_ERROR "install test: gloo was installed but exdyna_two_process was not built")
  endif()
  # The in-process group first (no RANK), then two processes: four equal digests.
  execute_process(COMMAND ${two} RESULT_VARIABLE rc OUTPUT_VARIABLE local ERROR_VARIABLE err)
  message(STATUS "two ranks in process:\n${local}${err}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "install test: exdyna_two_process in process failed (${rc})")
  endif()
  run_two_processes(${two} gloo)
  digests("${local}${gloo}" all)
  list(LENGTH all n)
  list(REMOVE_DUPLICATES all)
  list(LENGTH all distinct)
  if(NOT n EQUAL 4 OR NOT distinct EQUAL 1)
    message(FATAL_ERROR "install test: expected one update digest from 2 threads and 2 processes, "
                        "got ${n} digests, ${distinct} distinct: ${all}")
  endif()
endif()
file(REMOVE_RECURSE ${WORK_DIR})
