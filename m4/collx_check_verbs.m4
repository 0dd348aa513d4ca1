# COLLX_CHECK_VERBS
# --with-verbs[=DIR]: rdma-core's libibverbs, optional and detected.  Defines
# HAVE_VERBS and the VERBS_* flags when found; an explicit --with-verbs that
# cannot be satisfied is an error.
AC_DEFUN([COLLX_CHECK_VERBS], [
  AC_ARG_WITH([verbs],
    [AS_HELP_STRING([--with-verbs@<:@=DIR@:>@], [rdma-core libibverbs (optional, detected)])],
    [], [with_verbs=check])

  VERBS_CPPFLAGS=
  VERBS_LDFLAGS=
  VERBS_LIBS=
  collx_have_verbs=no
  AS_IF([test "x$with_verbs" != xno], [
    AS_CASE([$with_verbs], [yes|check], [],
            [VERBS_CPPFLAGS="-I$with_verbs/include"; VERBS_LDFLAGS="-L$with_verbs/lib"])
    collx_save_CPPFLAGS=$CPPFLAGS
    collx_save_LDFLAGS=$LDFLAGS
    collx_save_LIBS=$LIBS
    CPPFLAGS="$CPPFLAGS $VERBS_CPPFLAGS"
    LDFLAGS="$LDFLAGS $VERBS_LDFLAGS"
    AC_CHECK_HEADER([infiniband/verbs.h],
      [AC_CHECK_LIB([ibverbs], [ibv_get_device_list],
         [collx_have_verbs=yes; VERBS_LIBS=-libverbs])])
    CPPFLAGS=$collx_save_CPPFLAGS
    LDFLAGS=$collx_save_LDFLAGS
    LIBS=$collx_save_LIBS
    AS_IF([test "x$collx_have_verbs" = xno && test "x$with_verbs" != xcheck],
          [AC_MSG_ERROR([--with-verbs given but libibverbs was not found])])
  ])
  AS_IF([test "x$collx_have_verbs" = xyes],
        [AC_DEFINE([HAVE_VERBS], [1], [Define if rdma-core libibverbs is available])])
  AM_CONDITIONAL([HAVE_VERBS], [test "x$collx_have_verbs" = xyes])
  AC_SUBST([VERBS_CPPFLAGS])
  AC_SUBST([VERBS_LDFLAGS])
  AC_SUBST([VERBS_LIBS])
])
