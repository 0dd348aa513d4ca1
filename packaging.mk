# Packages (doc/deploy.md): the Debian packaging in debian/ and the rpm spec,
# collx.spec, which configure makes from collx.spec.in so that the version
# is set only in configure.ac.  Both travel in the `make dist` tarball:
#   rpmbuild -tb collx-VERSION.tar.gz
#   tar xf collx-VERSION.tar.gz && cd collx-VERSION && dpkg-buildpackage -us -uc -b
# .ci/packages.sh builds, checks, installs and purges them.
EXTRA_DIST += collx.spec \
	debian/changelog debian/control debian/copyright debian/rules debian/source/format \
	debian/collx.install debian/collx-default-plugin.install debian/collx.triggers \
	debian/collx.lintian-overrides \
	tests/deploy/pkg_files.sh

# distcheck builds with the libnccl-net.so link on, so that its uninstall
# check covers the link too.
AM_DISTCHECK_CONFIGURE_FLAGS = --enable-nccl-net-symlink
