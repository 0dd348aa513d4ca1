# What an installation hands its users besides the library and tools: module
# files for Lmod (VERSION.lua) and Environment Modules (VERSION, Tcl), and a
# pkg-config file.  They name absolute installation paths, so they are made
# at `make` time from their templates with the paths expanded (autoconf's
# @libdir@ is "${exec_prefix}/lib", useless in a module file).  A stamp
# records the paths in force: `make install prefix=/opt/collx/X` makes them
# again for that prefix before installing them.  DESTDIR never enters them.
modulefiledir = $(datadir)/modulefiles/collx
modulefile_DATA = modulefiles/collx/$(PACKAGE_VERSION).lua modulefiles/collx/$(PACKAGE_VERSION)
pkgconfigdir = $(libdir)/pkgconfig
pkgconfig_DATA = collx.pc
EXTRA_DIST += modulefiles/collx.lua.in modulefiles/collx.tcl.in collx.pc.in
CLEANFILES += $(modulefile_DATA) $(pkgconfig_DATA) modulefiles/paths.stamp modulefiles/paths.stamp.tmp

collx_subst = sed \
	-e 's|@PACKAGE_VERSION[@]|$(PACKAGE_VERSION)|g' \
	-e 's|@prefix[@]|$(prefix)|g' \
	-e 's|@exec_prefix[@]|$(exec_prefix)|g' \
	-e 's|@libdir[@]|$(libdir)|g' \
	-e 's|@bindir[@]|$(bindir)|g' \
	-e 's|@includedir[@]|$(includedir)|g' \
	-e 's|@datadir[@]|$(datadir)|g' \
	-e 's|@docdir[@]|$(docdir)|g' \
	-e "$$(case '$(libdir)' in $(collx_loader_dirs)) echo '/^prepend[-_]path[ (].\{0,1\}\(LD_LIBRARY\|PKG_CONFIG\)_PATH/d' ;; esac)" \
	-e "$$(case '$(bindir)' in /bin|/usr/bin) echo '/^prepend[-_]path[ (].\{0,1\}PATH\b/d' ;; esac)"
# Installed into a directory the dynamic loader (and pkg-config) searches
# anyway, as the deb and rpm packages do, the module files leave
# LD_LIBRARY_PATH and PKG_CONFIG_PATH alone (and PATH for /usr/bin): putting
# /usr/lib/... ahead of a job's own library path would reorder its search.
collx_loader_dirs = /lib|/lib64|/usr/lib|/usr/lib64|/lib/*-linux-gnu|/usr/lib/*-linux-gnu

# Rewritten only when a path or the version changed, so that an unchanged
# configuration rebuilds nothing.
modulefiles/paths.stamp: collx-force
	@$(MKDIR_P) modulefiles
	@echo 'version=$(PACKAGE_VERSION) prefix=$(prefix) exec_prefix=$(exec_prefix) libdir=$(libdir) bindir=$(bindir) includedir=$(includedir) datadir=$(datadir) docdir=$(docdir)' > $@.tmp
	@if cmp -s $@.tmp $@; then rm -f $@.tmp; else mv -f $@.tmp $@; fi
collx-force:
.PHONY: collx-force

modulefiles/collx/$(PACKAGE_VERSION).lua: $(srcdir)/modulefiles/collx.lua.in modulefiles/paths.stamp
	$(AM_V_GEN)$(MKDIR_P) modulefiles/collx && $(collx_subst) $(srcdir)/modulefiles/collx.lua.in > $@.tmp && mv -f $@.tmp $@
modulefiles/collx/$(PACKAGE_VERSION): $(srcdir)/modulefiles/collx.tcl.in modulefiles/paths.stamp
	$(AM_V_GEN)$(MKDIR_P) modulefiles/collx && $(collx_subst) $(srcdir)/modulefiles/collx.tcl.in > $@.tmp && mv -f $@.tmp $@
collx.pc: $(srcdir)/collx.pc.in modulefiles/paths.stamp
	$(AM_V_GEN)$(collx_subst) $(srcdir)/collx.pc.in > $@.tmp && mv -f $@.tmp $@
