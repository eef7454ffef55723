# Cap'n Proto 0.9 without its CMake config. Debian's CapnProtoConfig finds libraries through
# pkg-config files that hard-code prefix=/usr, so it fails on a copy unpacked elsewhere (the GPU
# machine's /tmp/pfx). Here the same imported targets are made from plain find_library calls.
find_path(_capnp_include capnp/common.h REQUIRED)
foreach(_lib kj capnp capnpc)
  find_library(_capnp_lib_${_lib} NAMES ${_lib}-0.9.2 ${_lib} REQUIRED)
  if(NOT TARGET CapnProto::${_lib})
    add_library(CapnProto::${_lib} SHARED IMPORTED)
    set_target_properties(CapnProto::${_lib} PROPERTIES
      IMPORTED_LOCATION "${_capnp_lib_${_lib}}"
      INTERFACE_INCLUDE_DIRECTORIES "${_capnp_include}")
  endif()
endforeach()
set_target_properties(CapnProto::capnp PROPERTIES INTERFACE_LINK_LIBRARIES CapnProto::kj)
set_target_properties(CapnProto::capnpc PROPERTIES INTERFACE_LINK_LIBRARIES CapnProto::capnp)
set(CAPNP_INCLUDE_DIRECTORY "${_capnp_include}")
set(CapnProto_FOUND TRUE)
message(STATUS "milesrt: Cap'n Proto from ${_capnp_lib_capnp}")
