# Writes a program's manual page from its own --help, gzip -9n compressed, as cmake/packaging.cmake
# installs it: the page cannot drift from the options the binary takes, which a hand-written page
# would (help2man's idea, without the dependency). Run at install time with cmake -P:
#   -DPROGRAM=<built binary> -DNAME=temperd -DSECTION=8 -DSUMMARY="one line"
#   -DVERSION=0.1.0 -DDATE=2026-11-29 -DOUT=<path of the .gz to write>
# The help text goes in verbatim (.nf), with what roff would read as requests escaped.
foreach(var PROGRAM NAME SECTION SUMMARY VERSION DATE OUT)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "deb_manpage.cmake: -D${var}= is missing")
  endif()
endforeach()

execute_process(COMMAND "${PROGRAM}" --help OUTPUT_VARIABLE help ERROR_VARIABLE help_err RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 OR help STREQUAL "")
  message(FATAL_ERROR "deb_manpage.cmake: ${PROGRAM} --help failed (${rc}): ${help_err}")
endif()

# roff: a backslash starts an escape (\e prints one); a line starting with . or ' is a request
# (\& in front makes it text); a hyphen in a word is \- for the man page's search and copy-paste.
function(roff_verbatim text out)
  # CLI11 prints argv[0] in its usage lines: the build tree's path here, the command's name in use.
  string(REPLACE "${PROGRAM}" "${NAME}" text "${text}")
  string(REPLACE "\\" "\\e" text "${text}")
  string(REPLACE "-" "\\-" text "${text}")
  string(REGEX REPLACE "(^|\n)([.'])" "\\1\\\\&\\2" text "${text}")
  if(NOT text MATCHES "\n$")
    string(APPEND text "\n")
  endif()
  set(${out} ".nf\n${text}.fi\n" PARENT_SCOPE)
endfunction()

# CLI11 lists subcommands under "Subcommands:", one per line, name first; each one's own --help
# becomes a subsection, so the page documents every option the program takes.
set(commands "")
if(help MATCHES "\nSubcommands:\n(.*)$")
  set(list_text "${CMAKE_MATCH_1}")
  string(FIND "${list_text}" "\n\n" end)  # the list ends at the first blank line, if any
  if(end GREATER -1)
    string(SUBSTRING "${list_text}" 0 ${end} list_text)
  endif()
  # An entry's line starts with two spaces and the name; its description may wrap onto lines
  # indented further, which do not match.
  string(REGEX MATCHALL "(^|\n)  [a-z][a-z0-9-]*" names "${list_text}")
  foreach(name IN LISTS names)
    string(STRIP "${name}" sub)
    execute_process(COMMAND "${PROGRAM}" ${sub} --help OUTPUT_VARIABLE sub_help RESULT_VARIABLE rc ERROR_QUIET)
    if(NOT rc EQUAL 0 OR sub_help STREQUAL "")
      message(FATAL_ERROR "deb_manpage.cmake: ${PROGRAM} ${sub} --help failed (${rc})")
    endif()
    roff_verbatim("${sub_help}" sub_text)
    string(REPLACE "-" "\\-" sub_title "${sub}")
    string(APPEND commands ".SS ${sub_title}\n${sub_text}")
  endforeach()
endif()
if(NOT commands STREQUAL "")
  set(commands ".SH COMMANDS\nEach command's own \\fB\\-\\-help\\fR:\n${commands}")
endif()
roff_verbatim("${help}" help)
string(TOUPPER "${NAME}" title)
if(SECTION STREQUAL "8")
  set(manual "System Administration")
else()
  set(manual "User Commands")
endif()
string(REPLACE "-" "\\-" escaped_name "${NAME}")
# The other two programs of the package.
set(see_also "")
foreach(other "temperd 8" "temper 1" "temper-lm 1")
  string(REPLACE " " ";" other "${other}")
  list(GET other 0 other_name)
  list(GET other 1 other_section)
  if(NOT other_name STREQUAL NAME)
    string(REPLACE "-" "\\-" other_name "${other_name}")
    if(NOT see_also STREQUAL "")
      string(APPEND see_also ",\n")
    endif()
    string(APPEND see_also ".BR ${other_name} (${other_section})")
  endif()
endforeach()
set(page ".TH ${title} ${SECTION} \"${DATE}\" \"temper ${VERSION}\" \"${manual}\"
.SH NAME
${escaped_name} \\- ${SUMMARY}
.SH SYNOPSIS
.B ${escaped_name}
[\\fIOPTIONS\\fR]
.SH DESCRIPTION
The text below is what
.B ${escaped_name} \\-\\-help
prints.
.PP
${help}${commands}.SH SEE ALSO
${see_also}
")

get_filename_component(out_dir "${OUT}" DIRECTORY)
file(MAKE_DIRECTORY "${out_dir}")
string(REGEX REPLACE "\\.gz$" "" plain "${OUT}")
file(WRITE "${plain}" "${page}")
# -n: no name or time stamp in the header, so the same page compresses to the same bytes.
execute_process(COMMAND gzip -9nf "${plain}" RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "deb_manpage.cmake: gzip -9n ${plain} failed")
endif()
