# Installing temper, and its Debian package (cpack -G DEB in the build directory, or the "package"
# target): temper_<version>_amd64.deb with the binaries where the FHS puts them, temperd's
# configuration as conffiles, the systemd unit, and the "temper" group made on install.
#
#   /usr/sbin/temperd                       the daemon
#   /usr/bin/temper, /usr/bin/temper-lm     the CLI and the engine's tool
#   /usr/libexec/temper/temper-stig-eval    the evaluation child (DefaultEvalHelperPath finds it)
#   /etc/temper/temperd.yaml, models.yaml   conffiles (deploy/debian/conffiles)
#   /lib/systemd/system/temperd.service     from deploy/temperd.service.in, naming <prefix>/sbin/temperd
#   /usr/share/doc/temper/copyright         deploy/debian/copyright (DEP-5)
#   /usr/share/doc/temper/changelog.Debian.gz   deploy/debian/changelog, gzip -9n
#   /usr/share/man/man{1,8}/*.gz            each program's --help as its manual page (deb_manpage.cmake)
#   /usr/share/lintian/overrides/temper     deploy/debian/lintian-overrides (+ -cuda), each one justified
#
# The package's version is the changelog's (cmake/deb_version.cmake): PROJECT_VERSION-REVISION.
# tests/package/ runs lintian, systemd-analyze and a hardening check on what this makes.
#
# Shared-library dependencies come from dpkg-shlibdeps; the others are declared below. CUDA builds
# link the CUDA runtime statically and load cuBLASLt and NCCL at run time, so the package installs
# on hosts without NVIDIA's libraries (the GPU hosts bring their own).
include(GNUInstallDirs)
include(${PROJECT_SOURCE_DIR}/cmake/deb_version.cmake)

install(TARGETS temperd RUNTIME DESTINATION ${CMAKE_INSTALL_SBINDIR})
install(TARGETS temper temper-lm RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS temper_stig_eval RUNTIME DESTINATION ${CMAKE_INSTALL_LIBEXECDIR}/temper)
# A stripped install (cpack's CPACK_STRIP_FILES) also drops the compilers' .comment sections, as
# Debian's dh_strip does (lintian: binary-has-unneeded-section); plain `strip` keeps them.
install(CODE "
  if(CMAKE_INSTALL_DO_STRIP)
    foreach(f ${CMAKE_INSTALL_SBINDIR}/temperd ${CMAKE_INSTALL_BINDIR}/temper ${CMAKE_INSTALL_BINDIR}/temper-lm
              ${CMAKE_INSTALL_LIBEXECDIR}/temper/temper-stig-eval)
      execute_process(COMMAND \"${CMAKE_OBJCOPY}\" --remove-section=.comment
                              \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/\${f}\" RESULT_VARIABLE rc)
      if(NOT rc EQUAL 0)
        message(FATAL_ERROR \"objcopy --remove-section=.comment \${f} failed\")
      endif()
    endforeach()
  endif()
")
# The configuration's place is fixed (temperd's default --config), whatever the prefix.
install(FILES config/temperd.yaml config/models.yaml DESTINATION /etc/temper)
# The unit names temperd by the prefix of the install being made (cpack's /usr, or cmake --install
# --prefix), so it is written at install time.
install(CODE "
  set(TEMPERD_PATH \"\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_SBINDIR}/temperd\")
  configure_file(\"${PROJECT_SOURCE_DIR}/deploy/temperd.service.in\"
                 \"\$ENV{DESTDIR}/lib/systemd/system/temperd.service\" @ONLY)
  message(STATUS \"Installing: \$ENV{DESTDIR}/lib/systemd/system/temperd.service\")
")

# Debian's documentation files. The changelog is compressed at install time with -n (no name or
# time stamp), so the package's bytes do not depend on when it was built.
install(FILES deploy/debian/copyright DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/doc/temper)
# The overrides of a CUDA build add those for what the CUDA runtime brings (each file says why).
file(READ ${PROJECT_SOURCE_DIR}/deploy/debian/lintian-overrides overrides)
if(TEMPER_HAVE_CUDA)
  file(READ ${PROJECT_SOURCE_DIR}/deploy/debian/lintian-overrides-cuda cuda_overrides)
  string(APPEND overrides "\n${cuda_overrides}")
endif()
set_property(DIRECTORY ${PROJECT_SOURCE_DIR} APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS
             ${PROJECT_SOURCE_DIR}/deploy/debian/lintian-overrides ${PROJECT_SOURCE_DIR}/deploy/debian/lintian-overrides-cuda)
file(CONFIGURE OUTPUT ${PROJECT_BINARY_DIR}/debian/lintian-overrides CONTENT "${overrides}" @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/debian/lintian-overrides DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/lintian/overrides
        RENAME temper)
install(CODE "
  set(doc \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_DATAROOTDIR}/doc/temper\")
  file(MAKE_DIRECTORY \"\${doc}\")
  execute_process(COMMAND gzip -9n -c \"${TEMPER_DEB_CHANGELOG}\"
                  OUTPUT_FILE \"\${doc}/changelog.Debian.gz\" RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR \"gzip -9n ${TEMPER_DEB_CHANGELOG} failed\")
  endif()
  message(STATUS \"Installing: \${doc}/changelog.Debian.gz\")
")
# Manual pages, one per program on PATH (the evaluation child in libexec is not run by people).
foreach(page "temperd|8|the temper daemon: fixes failing STIG rules on hosts and root file systems"
             "temper|1|submit STIG remediation batches to temperd and follow them"
             "temper-lm|1|run, serve and inspect temper's Gemma 4 engine")
  string(REPLACE "|" ";" page "${page}")
  list(GET page 0 name)
  list(GET page 1 section)
  list(GET page 2 summary)
  install(CODE "
    set(out \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_MANDIR}/man${section}/${name}.${section}.gz\")
    execute_process(COMMAND \"${CMAKE_COMMAND}\" \"-DPROGRAM=$<TARGET_FILE:${name}>\" -DNAME=${name}
                            -DSECTION=${section} \"-DSUMMARY=${summary}\" -DVERSION=${PROJECT_VERSION}
                            \"-DDATE=${TEMPER_DEB_DATE}\" \"-DOUT=\${out}\"
                            -P \"${PROJECT_SOURCE_DIR}/cmake/deb_manpage.cmake\" RESULT_VARIABLE rc)
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR \"writing the manual page of ${name} failed\")
    endif()
    message(STATUS \"Installing: \${out}\")
  ")
endforeach()

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME temper)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_DEBIAN_PACKAGE_RELEASE ${TEMPER_DEB_RELEASE})
# The project has no mail domain of its own; this is the identity its repository's commits carry,
# the same as in deploy/debian/changelog and copyright. A release build names a real mailbox here.
set(TEMPER_DEB_MAINTAINER "temper maintainers <maintainers@users.noreply.a-seed-c0a62a1e.example>"
    CACHE STRING "Maintainer field of the Debian package")
set(CPACK_PACKAGE_CONTACT "${TEMPER_DEB_MAINTAINER}")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "hardens Linux hosts against DISA STIG rules with an LLM remediation loop")
# The extended description in lines under 80 columns (lintian: extended-description-line-too-long);
# CPack indents each line and writes an empty one as " .".
set(CPACK_PACKAGE_DESCRIPTION "temperd fixes the failing rules of a STIG profile on a host or a root
file system: an Architect model plans, a Worker model applies a fix, OpenSCAP
decides, failed attempts are reverted from a snapshot and lessons are kept.
Root file system targets are changed inside a bubblewrap sandbox with capped
cgroups; SSH hosts keep an undo journal.

It serves its own Gemma 4 engine (CPU, or CUDA GPUs) or uses OpenAI-compatible
endpoints, and exports evidence as ARF, CKL, CKLB, XCCDF results and HTML. The
temper command submits and follows batches; temper-lm runs the engine alone.")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION admin)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# SCAP Security Guide's content is the default content_dirs; bubblewrap runs every command on a
# rootfs target; adduser makes the group. mmdebstrap builds roots (temper stig create), ssh reaches
# SSH targets.
set(CPACK_DEBIAN_PACKAGE_DEPENDS "adduser, bubblewrap, ssg-base, ssg-debderived")
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "openssh-client, mmdebstrap, ssg-debian, ssg-nondebian")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    ${PROJECT_SOURCE_DIR}/deploy/debian/conffiles ${PROJECT_SOURCE_DIR}/deploy/debian/postinst
    ${PROJECT_SOURCE_DIR}/deploy/debian/prerm ${PROJECT_SOURCE_DIR}/deploy/debian/postrm)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
include(CPack)
