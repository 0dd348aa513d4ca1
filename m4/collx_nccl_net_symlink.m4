# COLLX_NCCL_NET_SYMLINK
# --enable-nccl-net-symlink: `make install` also puts libnccl-net.so, a
# symbolic link to libnccl-net-collx.so, in $libdir.  libnccl-net.so is the
# name NCCL dlopens when NCCL_NET_PLUGIN is unset, so on a node where collx
# is the only plugin a job needs no setting at all.  Off by default: any
# other plugin installed under that name in the loader's path (many
# vendors' images ship one; NVIDIA/nccl#1634) would be shadowed by, or
# shadow, this one (doc/deploy.md).
AC_DEFUN([COLLX_NCCL_NET_SYMLINK], [
  AC_ARG_ENABLE([nccl-net-symlink],
    [AS_HELP_STRING([--enable-nccl-net-symlink],
      [also install libnccl-net.so -> libnccl-net-collx.so, the plugin NCCL loads when NCCL_NET_PLUGIN is unset (default: no)])],
    [], [enable_nccl_net_symlink=no])
  AS_CASE([$enable_nccl_net_symlink], [yes|no], [],
    [AC_MSG_ERROR([--enable-nccl-net-symlink takes yes or no, not '$enable_nccl_net_symlink'])])
  AM_CONDITIONAL([COLLX_NCCL_NET_SYMLINK], [test "x$enable_nccl_net_symlink" = xyes])
  dnl In the Makefile too, where tests/deploy/test_install.sh reads it.
  AC_SUBST([enable_nccl_net_symlink])
])
