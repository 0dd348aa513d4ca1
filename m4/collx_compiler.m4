# COLLX_DEBUG_OPTION
# --enable-debug: -O0 -g3, appended to CFLAGS before AC_PROG_CC runs (so it
# also keeps AC_PROG_CC's default "-g -O2" out): on the compile line
# CFLAGS come last, so the flags had no effect from COLLX_CFLAGS.
AC_DEFUN([COLLX_DEBUG_OPTION], [
  AC_ARG_ENABLE([debug], [AS_HELP_STRING([--enable-debug], [build with -O0 -g3 (after any CFLAGS given)])])
  AS_IF([test "x$enable_debug" = xyes], [CFLAGS="${CFLAGS:+$CFLAGS }-O0 -g3"])
])

# COLLX_COMPILER_OPTIONS
# --enable-asan, --enable-ubsan, --enable-tsan, --enable-werror.
# Results land in COLLX_CFLAGS / COLLX_LDFLAGS so that user CFLAGS stay theirs.
AC_DEFUN([COLLX_COMPILER_OPTIONS], [
  COLLX_CFLAGS="-Wall -Wextra -Wshadow -Wno-unused-parameter -fvisibility=hidden"
  COLLX_LDFLAGS=
  AC_ARG_ENABLE([asan], [AS_HELP_STRING([--enable-asan], [build with AddressSanitizer])])
  AS_IF([test "x$enable_asan" = xyes],
        [COLLX_CFLAGS="$COLLX_CFLAGS -fsanitize=address -fno-omit-frame-pointer"
         COLLX_LDFLAGS="$COLLX_LDFLAGS -fsanitize=address"])
  AC_ARG_ENABLE([ubsan], [AS_HELP_STRING([--enable-ubsan], [build with UndefinedBehaviorSanitizer])])
  AS_IF([test "x$enable_ubsan" = xyes],
        [COLLX_CFLAGS="$COLLX_CFLAGS -fsanitize=undefined -fno-sanitize-recover=undefined"
         COLLX_LDFLAGS="$COLLX_LDFLAGS -fsanitize=undefined"])
  AC_ARG_ENABLE([tsan], [AS_HELP_STRING([--enable-tsan], [build with ThreadSanitizer])])
  AS_IF([test "x$enable_tsan" = xyes],
        [COLLX_CFLAGS="$COLLX_CFLAGS -fsanitize=thread"
         COLLX_LDFLAGS="$COLLX_LDFLAGS -fsanitize=thread"])
  AC_ARG_ENABLE([werror], [AS_HELP_STRING([--enable-werror], [treat compiler warnings as errors])])
  AS_IF([test "x$enable_werror" = xyes], [COLLX_CFLAGS="$COLLX_CFLAGS -Werror"])
  AC_SUBST([COLLX_CFLAGS])
  AC_SUBST([COLLX_LDFLAGS])
])
