# What `cmake --install` puts where. GNU directories: prefix /usr puts the
# configuration in /etc, any other prefix under itself (PREFIX/etc).
#
#   bin/memd, memctl, memd-replay, memd-tracegen   (install rules of their own)
#   lib/libmemd.so.*  include/memd/client.h         the client library (C++)
#                     include/memd/memd.h           and its C API
#   lib/cmake/memd/                                 find_package(memd) -> memd::client
#   lib/pkgconfig/memd.pc                           pkg-config --cflags --libs memd
#   lib/python3*/dist-packages/memd/                the Python package (client/python)
#   lib/systemd/system/memd.service                 the unit, paths filled in
#   lib/sysusers.d/memd.conf                        the memd user and group
#   etc/memd/memd.toml                              the example configuration
#   share/doc/memd/README.md
#   share/man/man8/memd.8.gz, man1/memctl.1.gz      (tools/clidoc, from the programs'
#   share/bash-completion/completions/memd, memctl   own command lines)
#   share/zsh/vendor-completions/_memd, _memctl
#
# Components, one Debian package each (cmake/package.cmake): memd (the
# programs, unit, sysusers.d file, configuration), libmemd (the shared
# library), dev (headers, CMake package, pkg-config file, the libmemd.so
# link) and python (the Python package, not packaged as a .deb yet).
#
# Included last by the top-level CMakeLists.txt, so every target exists.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# systemd reads units and sysusers.d from PREFIX/lib whatever the libdir
# (never lib/x86_64-linux-gnu): not CMAKE_INSTALL_LIBDIR.
set(MEMD_SYSTEMD_UNIT_DIR "lib/systemd/system" CACHE STRING
  "Where memd.service goes, relative to the prefix or absolute")
set(MEMD_SYSUSERS_DIR "lib/sysusers.d" CACHE STRING
  "Where the sysusers.d file (memd.conf) goes, relative to the prefix or absolute")

# The client library (libmemd.so, client/CMakeLists.txt) and its CMake
# package. The installed programs link the client statically: nothing of
# theirs needs the library path.
install(TARGETS memd_client_shared EXPORT memdTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT libmemd NAMELINK_COMPONENT dev
  FILE_SET HEADERS DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT dev)
set(memd_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/memd)
install(EXPORT memdTargets NAMESPACE memd:: DESTINATION ${memd_cmake_dir} COMPONENT dev)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/memdConfig.cmake.in
  ${PROJECT_BINARY_DIR}/cmake/memdConfig.cmake
  INSTALL_DESTINATION ${memd_cmake_dir})
# 0.x: a new minor version may break the API.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/cmake/memdConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES
  ${PROJECT_BINARY_DIR}/cmake/memdConfig.cmake
  ${PROJECT_BINARY_DIR}/cmake/memdConfigVersion.cmake
  DESTINATION ${memd_cmake_dir} COMPONENT dev)

# pkg-config. The prefix is written relative to the file's own directory
# (pkg-config's ${pcfiledir}), so `cmake --install --prefix` anywhere keeps
# it right; an absolute libdir stays as it is.
set(memd_pc_dir ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(memd_pc_prefix "${CMAKE_INSTALL_PREFIX}")
  set(memd_pc_libdir "${CMAKE_INSTALL_LIBDIR}")
else()
  file(RELATIVE_PATH memd_pc_up /prefix/${memd_pc_dir} /prefix)
  string(REGEX REPLACE "/$" "" memd_pc_up "${memd_pc_up}")
  set(memd_pc_prefix "\${pcfiledir}/${memd_pc_up}")
  set(memd_pc_libdir "\${prefix}/${CMAKE_INSTALL_LIBDIR}")
endif()
if(IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
  set(memd_pc_includedir "${CMAKE_INSTALL_INCLUDEDIR}")
else()
  set(memd_pc_includedir "\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}")
endif()
configure_file(${PROJECT_SOURCE_DIR}/cmake/memd.pc.in ${PROJECT_BINARY_DIR}/memd.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/memd.pc DESTINATION ${memd_pc_dir} COMPONENT dev)

# The example configuration. Its directory follows GNUInstallDirs' rule
# applied to the prefix the install really uses (below): prefix /usr puts it
# in /etc/memd, /opt/X in /etc/opt/X/memd, any other prefix P in P/etc/memd.
# So the packages (cpack installs this build with prefix /usr) get
# /etc/memd/memd.toml whatever prefix the build was configured with. An
# absolute CMAKE_INSTALL_SYSCONFDIR is taken as it is. An existing file is
# replaced: the package marks it as a conffile.
set(memd_config_dir ${CMAKE_INSTALL_SYSCONFDIR}/memd)
install(FILES ${PROJECT_SOURCE_DIR}/README.md DESTINATION ${CMAKE_INSTALL_DOCDIR}
  COMPONENT memd)

install(FILES ${PROJECT_SOURCE_DIR}/systemd/memd.sysusers
  DESTINATION ${MEMD_SYSUSERS_DIR} RENAME memd.conf COMPONENT memd)

# The unit names installed paths (ExecStart=PREFIX/bin/memd --config ...), so
# it, and the configuration, are written at install time from the prefix the
# install really uses:
# `cmake --install build --prefix /opt/memd` gets a unit that starts
# /opt/memd/bin/memd, while DESTDIR (package staging) stays out of the paths.
install(CODE "
  set(memd_dirs
    \"${CMAKE_INSTALL_BINDIR}\" \"${memd_config_dir}\" \"${CMAKE_INSTALL_DOCDIR}\"
    \"${MEMD_SYSTEMD_UNIT_DIR}\")
  set(memd_full_dirs)
  foreach(dir IN LISTS memd_dirs)
    if(NOT IS_ABSOLUTE \"\${dir}\")
      set(dir \"\${CMAKE_INSTALL_PREFIX}/\${dir}\")
    endif()
    list(APPEND memd_full_dirs \"\${dir}\")
  endforeach()
  list(GET memd_full_dirs 0 MEMD_BINDIR)
  list(GET memd_full_dirs 1 MEMD_CONFIG_DIR)
  list(GET memd_full_dirs 2 MEMD_DOCDIR)
  list(GET memd_full_dirs 3 memd_unit_dir)
  if(NOT IS_ABSOLUTE \"${memd_config_dir}\")
    # GNUInstallDirs' special prefixes, decided now rather than at configure time.
    if(CMAKE_INSTALL_PREFIX STREQUAL \"/usr\")
      set(MEMD_CONFIG_DIR /etc/memd)
    elseif(CMAKE_INSTALL_PREFIX MATCHES \"^/opt/([^/]+)/?\$\")
      set(MEMD_CONFIG_DIR \"/etc/opt/\${CMAKE_MATCH_1}/memd\")
    endif()
  endif()
  file(INSTALL \"${PROJECT_SOURCE_DIR}/deploy/memd.toml\"
    DESTINATION \"\${MEMD_CONFIG_DIR}\")  # file(INSTALL) adds DESTDIR
  set(memd_unit \"\$ENV{DESTDIR}\${memd_unit_dir}/memd.service\")
  message(STATUS \"Installing: \${memd_unit}\")
  file(READ \"${PROJECT_SOURCE_DIR}/systemd/memd.service.in\" memd_unit_text)
  string(CONFIGURE \"\${memd_unit_text}\" memd_unit_text @ONLY)
  file(WRITE \"\${memd_unit}\" \"\${memd_unit_text}\")
  file(CHMOD \"\${memd_unit}\" PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)
  list(APPEND CMAKE_INSTALL_MANIFEST_FILES \"\${memd_unit}\")
" COMPONENT memd)

# The install test (tests/install) checks this layout.
if(TARGET install_test)
  target_compile_definitions(install_test PRIVATE
    MEMD_INSTALL_BINDIR="${CMAKE_INSTALL_BINDIR}"
    MEMD_INSTALL_LIBDIR="${CMAKE_INSTALL_LIBDIR}"
    MEMD_INSTALL_INCLUDEDIR="${CMAKE_INSTALL_INCLUDEDIR}"
    MEMD_INSTALL_CONFIG_DIR="${memd_config_dir}"
    MEMD_INSTALL_DOCDIR="${CMAKE_INSTALL_DOCDIR}"
    MEMD_INSTALL_MANDIR="${CMAKE_INSTALL_MANDIR}"
    MEMD_INSTALL_DATADIR="${CMAKE_INSTALL_DATADIR}"
    MEMD_INSTALL_UNIT_DIR="${MEMD_SYSTEMD_UNIT_DIR}"
    MEMD_INSTALL_SYSUSERS_DIR="${MEMD_SYSUSERS_DIR}"
    MEMD_INSTALL_PYTHON_PACKAGE_DIR="${MEMD_PYTHON_PACKAGE_DESTINATION}")
endif()
