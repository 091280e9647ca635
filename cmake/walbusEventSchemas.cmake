# walbus_add_event_schemas: an application's event schemas in its build.
#
#   walbus_add_event_schemas(TARGET app
#                            FUNCTION orders::RegisterEventSchemas
#                            SCHEMAS events/order_approved.fbs events/invoice_raised.fbs
#                            [INCLUDE_DIRS events/common]
#                            [HEADER order_events.h])
#
# Each .fbs file declares one event: its root table carries the event
# type, and best the file a file_identifier, as
#
#   attribute "walbus_event";
#   table OrderApproved (walbus_event: "orders.order-approved.v1") { ... }
#   root_type OrderApproved;
#   file_identifier "ORDA";
#
# flatc writes each file's C++ (<name>_generated.h) and binary schema
# (<name>.bfbs, with the built-in attributes the payload check needs:
# nested_flatbuffer, flexbuffer, bit_flags); `walbus schema generate` then writes HEADER (default
# <target>_events.h), which binds every root table to its event type
# (walbus::EventContract, walbus/adapters/flatbuffers.h) and declares
# FUNCTION, which registers every schema with a bus, and its source, with
# the binary schemas embedded. The target gets the source, the directory
# of the generated files on its include path and FlatBuffers' headers.
#
# The tools run on the build machine: WALBUS_FLATC and WALBUS_SCHEMA_TOOL
# name other ones (a cross build names the build machine's).

function(walbus_add_event_schemas)
  cmake_parse_arguments(PARSE_ARGV 0 ARG "" "TARGET;FUNCTION;HEADER" "SCHEMAS;INCLUDE_DIRS")
  if(ARG_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "walbus_add_event_schemas: unknown arguments ${ARG_UNPARSED_ARGUMENTS}")
  endif()
  foreach(required TARGET FUNCTION SCHEMAS)
    if(NOT ARG_${required})
      message(FATAL_ERROR "walbus_add_event_schemas: ${required} is required")
    endif()
  endforeach()
  if(NOT TARGET ${ARG_TARGET})
    message(FATAL_ERROR "walbus_add_event_schemas: ${ARG_TARGET} is no target")
  endif()
  if(NOT ARG_HEADER)
    set(ARG_HEADER ${ARG_TARGET}_events.h)
  endif()

  if(WALBUS_FLATC)
    set(flatc ${WALBUS_FLATC})
  else()
    if(NOT TARGET flatbuffers::flatc)
      find_package(FlatBuffers CONFIG REQUIRED)
    endif()
    set(flatc flatbuffers::flatc)
  endif()
  if(WALBUS_SCHEMA_TOOL)
    set(tool ${WALBUS_SCHEMA_TOOL})
  else()
    set(tool walbus::tool)
  endif()

  set(out ${CMAKE_CURRENT_BINARY_DIR}/walbus_events/${ARG_TARGET})
  file(MAKE_DIRECTORY ${out})
  set(include_flags)
  foreach(dir IN LISTS ARG_INCLUDE_DIRS)
    cmake_path(ABSOLUTE_PATH dir BASE_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR} OUTPUT_VARIABLE dir)
    list(APPEND include_flags -I ${dir})
  endforeach()

  set(binary_schemas)
  set(generated_headers)
  foreach(fbs IN LISTS ARG_SCHEMAS)
    cmake_path(ABSOLUTE_PATH fbs BASE_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR} OUTPUT_VARIABLE fbs)
    cmake_path(GET fbs STEM stem)
    add_custom_command(
      OUTPUT ${out}/${stem}_generated.h ${out}/${stem}.bfbs
      COMMAND ${flatc} --cpp --binary --schema --bfbs-builtins -o ${out} ${include_flags} ${fbs}
      DEPENDS ${fbs} ${flatc}
      COMMENT "flatc: the event schema ${stem}.fbs"
      VERBATIM)
    list(APPEND binary_schemas ${out}/${stem}.bfbs)
    list(APPEND generated_headers ${out}/${stem}_generated.h)
  endforeach()

  cmake_path(GET ARG_HEADER STEM header_stem)
  set(source ${out}/${header_stem}.cc)
  add_custom_command(
    OUTPUT ${out}/${ARG_HEADER} ${source}
    COMMAND ${tool} schema generate --function ${ARG_FUNCTION} --header ${out}/${ARG_HEADER} --source ${source}
            ${binary_schemas}
    DEPENDS ${binary_schemas} ${tool}
    COMMENT "walbus: the event bindings of ${ARG_TARGET} (${ARG_HEADER})"
    VERBATIM)

  target_sources(${ARG_TARGET} PRIVATE ${source} ${out}/${ARG_HEADER} ${generated_headers})
  target_include_directories(${ARG_TARGET} PRIVATE ${out})
  if(TARGET flatbuffers::flatbuffers)
    # Generated code is header-only: FlatBuffers' include path, not its library.
    target_include_directories(${ARG_TARGET} PRIVATE
                               $<TARGET_PROPERTY:flatbuffers::flatbuffers,INTERFACE_INCLUDE_DIRECTORIES>)
  endif()
endfunction()
