/* Whether the test runs under AddressSanitizer or ThreadSanitizer: then
 * the resident size says nothing about the plugin (shadow memory,
 * quarantine), and the sanitizer runs threads of its own. */
#ifndef COLLX_TESTS_SANITIZED_H
#define COLLX_TESTS_SANITIZED_H

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define COLLX_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define COLLX_SANITIZED 1
#endif
#endif
#ifndef COLLX_SANITIZED
#define COLLX_SANITIZED 0
#endif

#endif
