# Documentation, installed into $(docdir): the README and doc/*.md.
dist_doc_DATA += README.md doc/deploy.md doc/params.md doc/troubleshooting.md
# doc/design.md is for developers: shipped in the tarball, not installed.
EXTRA_DIST += doc/design.md

# doc/params.md (and README.md) carry the settings table that
# `collx-info --params` prints from src/util/params.def, between the
# "params:begin" and "params:end" markers.  `make params-doc` rewrites those
# blocks in the source tree; tests/deploy/test_params_doc.sh fails whenever
# they differ from what the code prints.
params-doc: collx-info$(EXEEXT)
	$(AM_V_GEN)for f in doc/params.md README.md; do \
	  ./collx-info$(EXEEXT) --params | \
	    $(SHELL) $(srcdir)/tests/deploy/params_block.sh replace $(srcdir)/$$f || exit 1; \
	done
.PHONY: params-doc
