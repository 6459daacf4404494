// EvalOverrides: library entry points that temper-stig-eval answers itself, because once it is
// inside a target (eval_confinement.h) the libraries would read the target's files there: data the
// target controls, taken for the evaluator's own configuration.
//
// Each is replaced for the whole process by defining it here: the executable's symbols come first
// in the dynamic linker's lookup, and libopenscap calls them through its PLT. Only temper-stig-eval
// links this file.
//
// setmntent: OpenSCAP decides which directories a recurse_file_system="local" walk may enter (SSG's
// walks over the whole tree for world-writable, unowned and ungrouped files) from the mount table:
// fsdev.c calls setmntent(_PATH_MOUNTED) at every such walk and keeps the st_dev of each entry's
// mount point. Inside the target that is the target's /etc/mtab, a link into its own /proc, which
// holds nothing, so every such walk would fail and find nothing (before containment the table was
// the host's, which listed the tree's mount among the host's). The tree has no mounts of its own:
// it is one local file system whose root is "/", and the mount table files (/etc/mtab,
// /proc/mounts, /proc/self/mounts) read as that one entry; any other file opens as glibc's own
// setmntent opens it.
//
// rpmReadConfigFiles: librpm reads rpmrc and macro files from the root directory, and a macro can
// run Lua when it is expanded (the rpm probes expand %{_dbpath}). OpenSCAP's rpm probes read that
// configuration when they first start, inside the target, so a target could run Lua in the
// evaluator, for instance to print verdicts of its choosing and exit. The probes get no rpm
// configuration instead: the call fails as it does on any host without rpm (such as the Debian
// hosts temper's rootfs targets are evaluated on, where rpminfo objects report the same error
// before and after containment).
//
// Thread safety: reentrant; no state.
#include <mntent.h>
#include <paths.h>
#include <stdio.h>
#include <stdio_ext.h>

#include <string_view>

extern "C" FILE* setmntent(const char* file, const char* mode) {
  static constexpr char kTargetMounts[] = "temper-target / temper-target rw 0 0\n";
  const std::string_view name(file ? file : "");
  if (name == _PATH_MOUNTED || name == "/proc/mounts" || name == "/proc/self/mounts") {
    return ::fmemopen(const_cast<char*>(kTargetMounts), sizeof kTargetMounts - 1, "r");
  }
  FILE* f = ::fopen(file, mode);
  if (f) ::__fsetlocking(f, FSETLOCKING_BYCALLER);
  return f;
}

// librpm's signature (rpm/rpmlib.h): non-zero is failure.
extern "C" int rpmReadConfigFiles(const char* /*file*/, const char* /*target*/) { return -1; }
