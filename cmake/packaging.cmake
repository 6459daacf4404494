# Installing temper, and its Debian package (cpack -G DEB in the build directory, or the "package"
# target): temper_<version>_amd64.deb with the binaries where the FHS puts them, temperd's
# configuration as conffiles, the systemd unit, and the "temper" group made on install.
#
#   /usr/sbin/temperd                       the daemon
#   /usr/bin/temper, /usr/bin/temper-lm     the CLI and the engine's tool
#   /usr/libexec/temper/temper-stig-eval    the evaluation child (DefaultEvalHelperPath finds it)
#   /etc/temper/temperd.yaml, models.yaml   conffiles (deploy/debian/conffiles)
#   /lib/systemd/system/temperd.service     from deploy/temperd.service.in, naming <prefix>/sbin/temperd
#
# Shared-library dependencies come from dpkg-shlibdeps; the others are declared below. CUDA builds
# link the CUDA runtime statically and load cuBLASLt and NCCL at run time, so the package installs
# on hosts without NVIDIA's libraries (the GPU hosts bring their own).
include(GNUInstallDirs)

install(TARGETS temperd RUNTIME DESTINATION ${CMAKE_INSTALL_SBINDIR})
install(TARGETS temper temper-lm RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS temper_stig_eval RUNTIME DESTINATION ${CMAKE_INSTALL_LIBEXECDIR}/temper)
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

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME temper)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "temper developers <temper@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "hardens Linux hosts against DISA STIG rules with an LLM remediation loop")
set(CPACK_PACKAGE_DESCRIPTION "temperd fixes the failing rules of a STIG profile on a host or a root \
filesystem: an Architect plans, a Worker applies a fix, OpenSCAP decides, failed attempts are reverted \
and lessons kept. It serves its own Gemma 4 engine or OpenAI-compatible endpoints, and exports evidence \
as ARF, CKL, CKLB, XCCDF results and HTML.")
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
