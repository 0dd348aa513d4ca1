# Unit tests: plain programs that exit 0 on success and print one line per
# failed check; test_devices.sh drives collx-info from the build directory.
check_PROGRAMS += tests/unit/test_ifmatch tests/unit/test_params
TESTS += tests/unit/test_ifmatch tests/unit/test_params tests/unit/test_devices.sh
EXTRA_DIST += tests/unit/test_devices.sh

tests_unit_test_ifmatch_SOURCES = tests/unit/test_ifmatch.c
tests_unit_test_ifmatch_LDADD = libcollx-core.la

tests_unit_test_params_SOURCES = tests/unit/test_params.c
tests_unit_test_params_LDADD = libcollx-core.la

check_PROGRAMS += tests/unit/test_handle tests/unit/test_stripe
TESTS += tests/unit/test_handle tests/unit/test_stripe
tests_unit_test_handle_SOURCES = tests/unit/test_handle.c
tests_unit_test_handle_LDADD = libcollx-core.la
tests_unit_test_stripe_SOURCES = tests/unit/test_stripe.c
tests_unit_test_stripe_LDADD = libcollx-core.la
TESTS += tests/unit/test_exports.sh
EXTRA_DIST += tests/unit/test_exports.sh
