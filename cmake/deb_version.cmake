# The Debian package's version, from the newest entry of deploy/debian/changelog, which is where
# Debian keeps it: "temper (0.1.0-1) ...". Its upstream part must be PROJECT_VERSION, so a version
# bump without a changelog entry stops here instead of shipping a package whose changelog names
# another version (lintian and apt-listchanges read it). Sets TEMPER_DEB_VERSION ("0.1.0-1") and
# TEMPER_DEB_RELEASE ("1"). Included by cmake/packaging.cmake and tests/package/CMakeLists.txt.
set(TEMPER_DEB_CHANGELOG "${PROJECT_SOURCE_DIR}/deploy/debian/changelog")
set_property(DIRECTORY "${PROJECT_SOURCE_DIR}" APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${TEMPER_DEB_CHANGELOG}")
file(STRINGS "${TEMPER_DEB_CHANGELOG}" _temper_deb_top LIMIT_COUNT 1)
if(NOT _temper_deb_top MATCHES "^temper \\(([^)-]+)-([^)]+)\\) ")
  message(FATAL_ERROR "${TEMPER_DEB_CHANGELOG}: the first line is not \"temper (VERSION-REVISION) ...\": "
                      "${_temper_deb_top}")
endif()
if(NOT CMAKE_MATCH_1 STREQUAL PROJECT_VERSION)
  message(FATAL_ERROR "${TEMPER_DEB_CHANGELOG} starts with version ${CMAKE_MATCH_1}-${CMAKE_MATCH_2}, but the "
                      "project is ${PROJECT_VERSION}: add an entry for ${PROJECT_VERSION}-1 (dch -v ${PROJECT_VERSION}-1)")
endif()
set(TEMPER_DEB_RELEASE "${CMAKE_MATCH_2}")
set(TEMPER_DEB_VERSION "${PROJECT_VERSION}-${TEMPER_DEB_RELEASE}")
# The day of that entry ("29 Nov 2026"), for the manual pages' headers: tied to the release, not to
# the day of the build, so two builds of one version make the same pages.
file(STRINGS "${TEMPER_DEB_CHANGELOG}" _temper_deb_trailer REGEX "^ -- .*>  [A-Z][a-z][a-z], " LIMIT_COUNT 1)
if(NOT _temper_deb_trailer MATCHES ">  [A-Z][a-z][a-z], ([0-9]+ [A-Z][a-z][a-z] [0-9]+) ")
  message(FATAL_ERROR "${TEMPER_DEB_CHANGELOG}: the first entry has no \" -- NAME <ADDRESS>  DATE\" line")
endif()
set(TEMPER_DEB_DATE "${CMAKE_MATCH_1}")
