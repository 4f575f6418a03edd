# The build every tensorlane native addon shares: cmake-js with Node-API 8 and node-addon-api, C++17,
# one shared library `<name>.node` from the package's native/*.cc and the kit's tensorlane/*.cc. An
# addon package's CMakeLists.txt finds this file through node's resolution of @tensorlane/core and
# calls
#   tensorlane_addon(<name> [LIBS <libraries to link>...])
# then adds what is its own (find_package, extra include folders or definitions) to target <name>.
# The addon's native code includes the kit as <tensorlane/Failure.h>, <tensorlane/Settler.h>, ...

if(NOT CMAKE_BUILD_TYPE)
  set(CMAKE_BUILD_TYPE Release)
endif()
find_package(Threads REQUIRED)
# The kit (tensorlane/: failures, arguments, settings, settlers, runtime libraries) lies beside this
# file; it is source, compiled into each addon.
set(TENSORLANE_KIT ${CMAKE_CURRENT_LIST_DIR})

function(tensorlane_addon name)
  cmake_parse_arguments(ADDON "" "" "LIBS" ${ARGN})
  # `tensorlane build` names the node-addon-api it depends on (-DNODE_ADDON_API_DIR); otherwise ask
  # node where npm put it for the package (the repository's, hoisted or not).
  if(DEFINED NODE_ADDON_API_DIR)
    set(node_addon_api_dir ${NODE_ADDON_API_DIR})
  else()
    execute_process(
      COMMAND node -p "require('path').dirname(require.resolve('node-addon-api/package.json'))"
      WORKING_DIRECTORY ${CMAKE_SOURCE_DIR}
      OUTPUT_VARIABLE node_addon_api_dir
      OUTPUT_STRIP_TRAILING_WHITESPACE
      COMMAND_ERROR_IS_FATAL ANY)
  endif()
  file(GLOB sources CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/native/*.cc ${TENSORLANE_KIT}/tensorlane/*.cc)
  add_library(${name} SHARED ${sources} ${CMAKE_JS_SRC})
  set_target_properties(${name} PROPERTIES PREFIX "" SUFFIX ".node" CXX_STANDARD 17 CXX_STANDARD_REQUIRED ON)
  target_include_directories(${name} PRIVATE ${CMAKE_JS_INC} ${node_addon_api_dir} ${TENSORLANE_KIT})
  target_compile_definitions(${name} PRIVATE NAPI_VERSION=8 NAPI_CPP_EXCEPTIONS)
  target_compile_options(${name} PRIVATE -Wall -Wextra -fvisibility=hidden)
  target_link_libraries(${name} PRIVATE ${CMAKE_JS_LIB} Threads::Threads ${CMAKE_DL_LIBS} ${ADDON_LIBS})
  # Never unmapped: Node dlcloses an addon when a worker that loaded it ends (the transfer agent is
  # one), while the addon's own threads (transfers, communicators) may still be returning through its
  # code, the worker's isolate (deleted after) may still call the release callbacks of buffers it
  # made, and process-wide state (NIXL's agent, gloo's device) lives in its statics.
  target_link_options(${name} PRIVATE -Wl,-z,nodelete)
endfunction()
