# The installed library, as a user gets it: `cmake --install` of the library component into an
# empty prefix, then examples/cpp configured (find_package(exdyna)), built and run
# against that prefix alone. Run by CTest (test `install`) as
#   cmake -DBUILD_DIR=... -DWORK_DIR=... -DCONSUMER_DIR=... -DGENERATOR=... -DCXX=...
#         [-DCUDA_ROOT=...] -P install_test.cmake
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

file(REMOVE_RECURSE ${WORK_DIR})
set(prefix ${WORK_DIR}/prefix)
run_step("install" ${CMAKE_COMMAND} --install ${BUILD_DIR} --component library --prefix ${prefix})
if(NOT EXISTS ${prefix}/include/exdyna/sparsifiers/factory.hpp)
  message(FATAL_ERROR "install test: no include/exdyna/sparsifiers/factory.hpp under ${prefix}")
endif()
if(EXISTS ${prefix}/include/exdyna/comm/engines OR EXISTS ${prefix}/include/exdyna/sim)
  message(FATAL_ERROR "install test: the harness's headers were installed under ${prefix}")
endif()

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
