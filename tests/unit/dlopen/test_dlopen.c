/* supervisor/dlopen: libraries resolved on first use; a missing library or symbol is a clean failure,
 * remembered, never a crash; the forwarders reach the real library. */
#include <hs.h>
#include <nftables/libnftables.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "supervisor/dlopen/dlopen.h"

static void missing_library_fails_and_stays_failed(void **state) {
  (void)state;
  static int library_state;
  void *slot = (void *)1;
  const char *const names[] = {"anything"};
  void **const slots[] = {&slot};
  assert_false(dome_dlopen_resolve("libdome-does-not-exist.so.9", names, slots, 1, &library_state));
  assert_false(dome_dlopen_resolve("libdome-does-not-exist.so.9", names, slots, 1, &library_state));
  assert_ptr_equal(slot, (void *)1); /* untouched */
}

static void missing_symbol_fails(void **state) {
  (void)state;
  static int library_state;
  void *first = NULL, *second = NULL;
  const char *const names[] = {"zstd_does_not_have_this", "ZSTD_versionNumber"};
  void **const slots[] = {&first, &second};
  assert_false(dome_dlopen_resolve("libzstd.so.1", names, slots, 2, &library_state));
}

static void present_library_resolves(void **state) {
  (void)state;
  static int library_state;
  unsigned (*version)(void) = NULL;
  const char *const names[] = {"ZSTD_versionNumber"};
  void **const slots[] = {(void **)&version};
  assert_true(dome_dlopen_resolve("libzstd.so.1", names, slots, 1, &library_state));
  assert_non_null(version);
  assert_true(version() >= 10400); /* zstd 1.4+ */
}

static void vectorscan_forwarders_work(void **state) {
  (void)state;
  assert_int_equal(hs_valid_platform(), HS_SUCCESS);
  const char *expressions[] = {"ab+c"};
  unsigned flags[] = {HS_FLAG_SINGLEMATCH}, ids[] = {7};
  hs_database_t *db = NULL;
  hs_compile_error_t *error = NULL;
  assert_int_equal(hs_compile_multi(expressions, flags, ids, 1, HS_MODE_STREAM, NULL, &db, &error),
                   HS_SUCCESS);
  hs_scratch_t *scratch = NULL;
  assert_int_equal(hs_alloc_scratch(db, &scratch), HS_SUCCESS);
  hs_free_scratch(scratch);
  hs_free_database(db);
  /* a compile error comes back as such and is freed through the forwarder */
  const char *bad[] = {"(unclosed"};
  assert_int_equal(hs_compile_multi(bad, flags, ids, 1, HS_MODE_STREAM, NULL, &db, &error),
                   HS_COMPILER_ERROR);
  assert_non_null(error);
  assert_non_null(strstr(error->message, "arenthes"));
  assert_int_equal(hs_free_compile_error(error), HS_SUCCESS);
}

static void nftables_forwarders_work(void **state) {
  (void)state;
  struct nft_ctx *ctx = nft_ctx_new(NFT_CTX_DEFAULT);
  assert_non_null(ctx);
  assert_int_equal(nft_ctx_buffer_output(ctx), 0);
  assert_int_equal(nft_ctx_buffer_error(ctx), 0);
  unsigned flags = nft_ctx_output_get_flags(ctx);
  nft_ctx_output_set_flags(ctx, flags | NFT_CTX_OUTPUT_JSON);
  assert_int_equal(nft_ctx_output_get_flags(ctx), flags | NFT_CTX_OUTPUT_JSON);
  /* a syntax error is reported in the error buffer, nothing is applied */
  assert_int_not_equal(nft_run_cmd_from_buffer(ctx, "this is not nft"), 0);
  assert_non_null(nft_ctx_get_error_buffer(ctx));
  nft_ctx_free(ctx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(missing_library_fails_and_stays_failed), cmocka_unit_test(missing_symbol_fails),
      cmocka_unit_test(present_library_resolves), cmocka_unit_test(vectorscan_forwarders_work),
      cmocka_unit_test(nftables_forwarders_work)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
