# Who may include what, enforced by the compiler.
#
# Every #include names a path from the repository root
# ("daemon/pool/pool.h"), yet no target gets the root on its include path:
# the root would let any file include any other. Instead each target gets a
# view, a directory in the build tree holding symbolic links to the paths
# the target owns, under their root-relative names. Include directories
# travel with target_link_libraries, so a module sees its own view and the
# views of what it links, and nothing else: pool/ including
# "daemon/broker/broker.h" fails with "No such file or directory".
# The layering this gives (docs/design.md, "Layers"): service -> broker ->
# pool -> backend -> common; session -> common; metrics -> broker and the
# service's CallObserver interface alone.
#
# memd_expose(<target> <PUBLIC|PRIVATE|INTERFACE> <path>...)
#   Each <path> is a directory or a file relative to the repository root.
#   Once per target and scope: a second call replaces the first.
function(memd_expose target scope)
  string(TOLOWER ${scope} kind)
  set(view ${CMAKE_BINARY_DIR}/include-views/${target}.${kind})
  file(REMOVE_RECURSE ${view})  # Removes the links, never what they point to.
  foreach(path IN LISTS ARGN)
    if(NOT EXISTS ${PROJECT_SOURCE_DIR}/${path})
      message(FATAL_ERROR "memd_expose(${target}): no ${path} in the source tree")
    endif()
    get_filename_component(parent ${view}/${path} DIRECTORY)
    file(MAKE_DIRECTORY ${parent})
    file(CREATE_LINK ${PROJECT_SOURCE_DIR}/${path} ${view}/${path} SYMBOLIC)
  endforeach()
  target_include_directories(${target} ${scope} $<BUILD_INTERFACE:${view}>)
endfunction()
