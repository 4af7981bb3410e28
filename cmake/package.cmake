# Debian packages of this build, made by CPack from the install rules
# (cmake/install.cmake and each program's own): `tools/dev package`, or
#   cpack --config build/CPackConfig.cmake -B build/packages
#
#   memd         memd, memctl, memd-replay, memd-tracegen, the systemd unit,
#                the sysusers.d file (user and group memd), /etc/memd/memd.toml
#                (a conffile), README.md, memd(8) and memctl(1), bash and zsh
#                completions of both
#   libmemd0.4   libmemd.so.0.4 (the package name follows the soname)
#   libmemd-dev  the headers (memd/*.h), libmemd.so, find_package(memd),
#                memd.pc
#
# CPack rather than a debian/ directory: the install rules already say where
# every file goes and which component it is, so a package is one more view
# of `cmake --install`, built from the same tree in seconds; debian/rules
# would run a second configure and build (dh_auto_configure) of the whole
# project, minutes on a CI machine that has none to spare. What debhelper
# would add is written here instead: dependencies from dpkg-shlibdeps, the
# shlibs file and ldconfig trigger of the library, stripped binaries, the
# conffile, the maintainer scripts (packaging/deb/memd/), and the copyright and
# changelog that lintian asks of every package. tests/install/package_test.sh
# runs lintian on the result: no error or warning, each one left overridden
# with its reason in packaging/deb/*/lintian-overrides. Left at lintian's
# info level (shown with -I only): hardening-no-bindnow and
# hardening-no-fortify-functions (the project's flags, not dpkg-buildflags':
# -Wl,-z,now and -D_FORTIFY_SOURCE=2 would be a project-wide choice),
# binary-has-unneeded-section .comment (cpack strips with plain `strip`),
# no-symbols-control-file (a shlibs file instead: libmemd's exports are
# fixed by its version script and its soname changes with each 0.x minor
# version) and package-supports-alternative-init-but-no-init.d-script
# (systemd only).
#
# The build's own prefix does not matter: cpack installs it with prefix /usr,
# and the unit and configuration follow the prefix at install time
# (cmake/install.cmake). The Python package (component python) is not
# packaged as a .deb: `tools/dev wheel` makes a wheel of it.
set(MEMD_PACKAGE_MAINTAINER "memd developers <memd-dev@example.org>" CACHE STRING
  "Maintainer field of the Debian packages")
set(MEMD_PACKAGE_RELEASE 1 CACHE STRING
  "Debian revision of the packages (VERSION-RELEASE)")

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME memd)
set(CPACK_PACKAGE_VENDOR "memd developers")
set(CPACK_PACKAGE_CONTACT "${MEMD_PACKAGE_MAINTAINER}")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL memd libmemd dev)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_RELEASE ${MEMD_PACKAGE_RELEASE})
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
# Dependencies on Debian's library packages, found by dpkg-shlibdeps in what
# each package holds; nothing is bundled.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# Scripts 0755, conffiles 0644, whatever the checkout's modes.
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(memd_deb_version ${PROJECT_VERSION}-${MEMD_PACKAGE_RELEASE})
set(memd_soversion ${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR})
set(memd_lib_package libmemd${memd_soversion})

set(CPACK_DEBIAN_MEMD_PACKAGE_NAME memd)
set(CPACK_DEBIAN_MEMD_PACKAGE_SECTION admin)
# systemd-sysusers (postinst): the systemd package on a systemd node, the
# standalone one in a container image.
set(CPACK_DEBIAN_MEMD_PACKAGE_DEPENDS "systemd | systemd-standalone-sysusers")
set(CPACK_DEBIAN_MEMD_PACKAGE_CONTROL_EXTRA
  ${PROJECT_SOURCE_DIR}/packaging/deb/memd/postinst
  ${PROJECT_SOURCE_DIR}/packaging/deb/memd/prerm
  ${PROJECT_SOURCE_DIR}/packaging/deb/memd/postrm
  ${PROJECT_SOURCE_DIR}/packaging/deb/memd/conffiles)
set(CPACK_COMPONENT_MEMD_DESCRIPTION "per-node GPU and host memory broker
memd owns a node's device memory pools, pinned host staging memory and a
host-device transfer engine. Processes ask it for buffers by name through
libmemd and map them by file descriptor (CUDA VMM, Level Zero, memfd).
This package holds the daemon, its systemd unit, the memctl operator tool
and the trace tools memd-replay and memd-tracegen.")

set(CPACK_DEBIAN_LIBMEMD_PACKAGE_NAME ${memd_lib_package})
set(CPACK_DEBIAN_LIBMEMD_PACKAGE_SECTION libs)
# The shlibs file (and the ldconfig trigger) of the package that holds a
# library: libmemd0.4.
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS_POLICY ">=")
set(CPACK_DEBIAN_LIBMEMD_PACKAGE_CONTROL_EXTRA ${PROJECT_SOURCE_DIR}/packaging/deb/libmemd/triggers)
set(CPACK_COMPONENT_LIBMEMD_DESCRIPTION "client library of the memd memory broker
libmemd connects a process to its node's memd, creates and opens named
buffers and maps them (host, pinned and GPU memory). It has a C++ and a C
API; gRPC and protobuf are inside it, not in its interface.")

set(CPACK_DEBIAN_DEV_PACKAGE_NAME libmemd-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
# memd/client.h includes Abseil headers (memdConfig.cmake asks for absl).
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS "${memd_lib_package} (= ${memd_deb_version}), libabsl-dev")
set(CPACK_COMPONENT_DEV_DESCRIPTION "client library of the memd memory broker (development files)
Headers of libmemd's C++ API (memd/client.h) and C API (memd/memd.h), the
CMake package (find_package(memd), target memd::client) and the pkg-config
file (memd.pc).")

# /usr/share/doc/PACKAGE/{copyright,changelog.Debian.gz} of each package,
# which Debian policy asks for, and the lintian overrides that explain each
# warning left (packaging/deb/*/lintian-overrides); only in the packages,
# not in `cmake --install`. The changelog's date: SOURCE_DATE_EPOCH when set.
string(TIMESTAMP memd_changelog_date "%a, %d %b %Y %H:%M:%S +0000" UTC)
set(memd_package_dir ${PROJECT_BINARY_DIR}/packaging)
configure_file(${PROJECT_SOURCE_DIR}/packaging/deb/changelog.in
  ${memd_package_dir}/changelog.Debian @ONLY)
execute_process(COMMAND gzip -9nf ${memd_package_dir}/changelog.Debian
  COMMAND_ERROR_IS_FATAL ANY)
configure_file(${PROJECT_SOURCE_DIR}/packaging/deb/libmemd/lintian-overrides.in
  ${memd_package_dir}/libmemd/lintian-overrides @ONLY)
foreach(pair memd:memd libmemd:${memd_lib_package} dev:libmemd-dev)
  string(REPLACE ":" ";" pair "${pair}")
  list(GET pair 0 component)
  list(GET pair 1 package)
  install(FILES ${PROJECT_SOURCE_DIR}/packaging/deb/copyright
    ${memd_package_dir}/changelog.Debian.gz
    DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/${package}
    COMPONENT ${component} EXCLUDE_FROM_ALL)
  set(overrides ${PROJECT_SOURCE_DIR}/packaging/deb/${component}/lintian-overrides)
  if(NOT EXISTS ${overrides})
    set(overrides ${memd_package_dir}/${component}/lintian-overrides)
  endif()
  install(FILES ${overrides} DESTINATION ${CMAKE_INSTALL_DATADIR}/lintian/overrides
    RENAME ${package} COMPONENT ${component} EXCLUDE_FROM_ALL)
endforeach()

include(CPack)
