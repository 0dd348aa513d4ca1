# COLLX_CHECK_CUDA
# --with-cuda[=DIR]: CUDA headers, optional.  collx never links the CUDA
# driver: it dlopens libcuda.so.1 at run time, so the plugin loads where no
# driver exists.  The headers only let the GPU-locality code see the driver
# API's types; HAVE_CUDA_H says whether they were found.
AC_DEFUN([COLLX_CHECK_CUDA], [
  AC_ARG_WITH([cuda],
    [AS_HELP_STRING([--with-cuda@<:@=DIR@:>@], [CUDA toolkit, for GPU locality (optional, default: /usr/local/cuda if present)])],
    [], [with_cuda=check])
  CUDA_CPPFLAGS=
  collx_have_cuda=no
  AS_IF([test "x$with_cuda" != xno], [
    AS_CASE([$with_cuda],
      [yes|check], [AS_IF([test -f /usr/local/cuda/include/cuda.h], [CUDA_CPPFLAGS="-I/usr/local/cuda/include"])],
      [CUDA_CPPFLAGS="-I$with_cuda/include"])
    collx_save_CPPFLAGS=$CPPFLAGS
    CPPFLAGS="$CPPFLAGS $CUDA_CPPFLAGS"
    AC_CHECK_HEADER([cuda.h], [collx_have_cuda=yes])
    CPPFLAGS=$collx_save_CPPFLAGS
    AS_IF([test "x$collx_have_cuda" = xno && test "x$with_cuda" != xcheck],
          [AC_MSG_ERROR([--with-cuda given but cuda.h was not found])])
  ])
  AS_IF([test "x$collx_have_cuda" = xyes],
        [AC_DEFINE([HAVE_CUDA_H], [1], [Define if CUDA driver API headers are available])],
        [CUDA_CPPFLAGS=])
  AC_SUBST([CUDA_CPPFLAGS])
])
