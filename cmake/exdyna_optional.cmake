# Optional parts: each option is AUTO (built where its dependencies are found), ON (required: a
# missing dependency stops configure, naming it) or OFF. After exdyna_resolve() the option's
# variable is a plain ON or OFF in the including scope, so `if(EXDYNA_WITH_MPI)` reads as before;
# configure ends with one summary line of what was built and why the rest was not.

set(EXDYNA_PARTS_BUILT "")
set(EXDYNA_PARTS_SKIPPED "")

# exdyna_option(<var> <doc>): a cache entry AUTO|ON|OFF, default AUTO; a bad value is refused.
function(exdyna_option var doc)
  set(${var} AUTO CACHE STRING "${doc}: AUTO (where found), ON (required) or OFF")
  set_property(CACHE ${var} PROPERTY STRINGS AUTO ON OFF)
  string(TOUPPER "${${var}}" v)
  if(NOT v STREQUAL "AUTO" AND NOT v MATCHES "^(ON|OFF|YES|NO|TRUE|FALSE|Y|N|1|0)$")
    message(FATAL_ERROR "${var}=${${var}} is not valid; expected AUTO, ON or OFF")
  endif()
endfunction()

# exdyna_wanted(<var> <out>): <out> is ON unless <var> is off (then there is nothing to look for).
function(exdyna_wanted var out)
  string(TOUPPER "${${var}}" v)
  if(v STREQUAL "AUTO" OR ${var})
    set(${out} ON PARENT_SCOPE)
  else()
    set(${out} OFF PARENT_SCOPE)
  endif()
endfunction()

# exdyna_resolve(<var> <part> <found> <why-not>): sets <var> to ON or OFF in the caller's scope
# and records <part> as built or skipped. <found> is a boolean; <why-not> says what is missing.
macro(exdyna_resolve var part found why_not)
  string(TOUPPER "${${var}}" _exdyna_v)
  if(NOT _exdyna_v STREQUAL "AUTO" AND NOT ${var})
    set(${var} OFF)
    list(APPEND EXDYNA_PARTS_SKIPPED "${part} (${var}=OFF)")
  elseif(${found})
    set(${var} ON)
    list(APPEND EXDYNA_PARTS_BUILT "${part}")
  elseif(_exdyna_v STREQUAL "AUTO")
    set(${var} OFF)
    list(APPEND EXDYNA_PARTS_SKIPPED "${part} (${why_not})")
  else()
    message(FATAL_ERROR "${var}=${${var}} but ${part} cannot be built: ${why_not}")
  endif()
endmacro()

# exdyna_part(<part> <found> <why-not>): a part with no option of its own (built where found).
macro(exdyna_part part found why_not)
  if(${found})
    list(APPEND EXDYNA_PARTS_BUILT "${part}")
  else()
    list(APPEND EXDYNA_PARTS_SKIPPED "${part} (${why_not})")
  endif()
endmacro()

function(exdyna_print_parts)
  string(REPLACE ";" ", " built "${EXDYNA_PARTS_BUILT}")
  message(STATUS "exdyna: built: ${built}")
  foreach(s ${EXDYNA_PARTS_SKIPPED})
    message(STATUS "exdyna: skipped: ${s}")
  endforeach()
endfunction()
