# COLLX_CHECK_HWLOC
# --with-hwloc[=DIR]: hwloc 2.x, required.  Sets HWLOC_CPPFLAGS, HWLOC_LDFLAGS,
# HWLOC_LIBS.  Compiler and linker flags are saved and restored around the
# probe so that one check cannot leak into the next.
AC_DEFUN([COLLX_CHECK_HWLOC], [
  AC_ARG_WITH([hwloc],
    [AS_HELP_STRING([--with-hwloc@<:@=DIR@:>@], [hwloc 2.x installation (required)])],
    [], [with_hwloc=yes])
  AS_IF([test "x$with_hwloc" = xno],
        [AC_MSG_ERROR([hwloc is required: collx places its threads and buffers from the hwloc topology])])

  HWLOC_CPPFLAGS=
  HWLOC_LDFLAGS=
  HWLOC_LIBS=-lhwloc
  AS_IF([test "x$with_hwloc" != xyes],
        [HWLOC_CPPFLAGS="-I$with_hwloc/include"
         AS_IF([test -d "$with_hwloc/lib64"],
               [HWLOC_LDFLAGS="-L$with_hwloc/lib64 -Wl,-rpath,$with_hwloc/lib64"],
               [HWLOC_LDFLAGS="-L$with_hwloc/lib -Wl,-rpath,$with_hwloc/lib"])])

  collx_save_CPPFLAGS=$CPPFLAGS
  collx_save_LDFLAGS=$LDFLAGS
  collx_save_LIBS=$LIBS
  CPPFLAGS="$CPPFLAGS $HWLOC_CPPFLAGS"
  LDFLAGS="$LDFLAGS $HWLOC_LDFLAGS"

  AC_CHECK_HEADER([hwloc.h], [],
    [AC_MSG_ERROR([hwloc.h not found: install libhwloc-dev or pass --with-hwloc=DIR])])
  AC_MSG_CHECKING([for hwloc 2.x])
  AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[#include <hwloc.h>]],
      [[#if HWLOC_API_VERSION < 0x00020000
        #error hwloc too old
        #endif]])],
    [AC_MSG_RESULT([yes])],
    [AC_MSG_RESULT([no]); AC_MSG_ERROR([collx needs hwloc 2.x])])
  AC_CHECK_LIB([hwloc], [hwloc_topology_init], [],
    [AC_MSG_ERROR([libhwloc not found: install libhwloc-dev or pass --with-hwloc=DIR])])

  CPPFLAGS=$collx_save_CPPFLAGS
  LDFLAGS=$collx_save_LDFLAGS
  LIBS=$collx_save_LIBS
  AC_SUBST([HWLOC_CPPFLAGS])
  AC_SUBST([HWLOC_LDFLAGS])
  AC_SUBST([HWLOC_LIBS])
])
