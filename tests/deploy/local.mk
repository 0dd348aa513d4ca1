# Deployment tests: the plugin as each NCCL generation loads it (ncclNet
# v12 down to v7), an installation into a temporary prefix used through
# Lmod / Environment Modules and pkg-config, and the generated settings
# documentation.
check_PROGRAMS += tests/deploy/test_abi_versions
tests_deploy_test_abi_versions_SOURCES = tests/deploy/test_abi_versions.c
tests_deploy_test_abi_versions_LDADD = -ldl
TESTS += tests/deploy/test_abi_versions tests/deploy/test_install.sh tests/deploy/test_params_doc.sh
EXTRA_DIST += tests/deploy/check_lib.sh tests/deploy/test_install.sh tests/deploy/test_params_doc.sh tests/deploy/params_block.sh
