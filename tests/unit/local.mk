# Unit tests: plain programs that exit 0 on success and print one line per
# failed check; test_devices.sh drives collx-info from the build directory.
check_PROGRAMS += tests/unit/test_ifmatch tests/unit/test_params
TESTS += tests/unit/test_ifmatch tests/unit/test_params tests/unit/test_devices.sh
EXTRA_DIST += tests/unit/test_devices.sh

tests_unit_test_ifmatch_SOURCES = tests/unit/test_ifmatch.c
tests_unit_test_ifmatch_LDADD = libcollx-core.la

tests_unit_test_params_SOURCES = tests/unit/test_params.c
tests_unit_test_params_LDADD = libcollx-core.la
